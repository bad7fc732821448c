/** Timed waits that can be cut short: `wait(ms)` resolves after `ms` or at the next `wake()`. */
export class Waker {
  private readonly waiting = new Set<() => void>();

  wait(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      this.waiting.add(done);
    });
  }

  wake(): void {
    for (const done of [...this.waiting]) done();
  }
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
