/**
 * A FIFO mutex: `run(fn)` starts `fn` once every earlier `run` has settled. `Consumer` uses one
 * so that `poll`, `rebalance` and `close` never interleave.
 */
export class Serial {
  #tail: Promise<void> = Promise.resolve();

  /**
   * Runs `fn` exclusively. `fn` may return `hold`: a promise that keeps the lock after `fn`
   * returned (a dispatch whose caller gave up but whose statement is still running).
   */
  run<T>(fn: (hold: (p: Promise<unknown>) => void) => Promise<T>): Promise<T> {
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const before = this.#tail;
    this.#tail = before.then(() => mine);
    return before.then(async () => {
      let held: Promise<unknown> | undefined;
      try {
        return await fn((p) => (held = p));
      } finally {
        if (held) held.then(release, release);
        else release();
      }
    });
  }
}
