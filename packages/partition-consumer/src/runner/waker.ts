/**
 * Timed waits that can be cut short: `wait(ms)` resolves after `ms` or at the next `wake()`.
 * A `wake()` while nobody waits is kept for the next `wait`, so a wake-up is never lost between
 * a check and the wait that follows it.
 */
export class Waker {
  readonly #waiting = new Set<() => void>();
  #pending = false;

  wait(ms: number): Promise<void> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      this.#waiting.add(done);
    });
  }

  wake(): void {
    if (this.#waiting.size === 0) this.#pending = true;
    for (const done of [...this.#waiting]) done();
  }
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
