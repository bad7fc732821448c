/** Thrown when a scenario's own correctness check fails: the figures of that run are void. */
export class VerificationError extends Error {
  override readonly name = 'VerificationError';
}

/** Fails loudly unless `cond` holds. */
export function check(cond: boolean, message: string): asserts cond {
  if (!cond) throw new VerificationError(message);
}

/**
 * Counts how many times each of `n` items (numbered 0…n-1) was handled, so a scenario can prove
 * every job ran exactly once and notice the moment the last one arrives.
 */
export class ExactlyOnce {
  private readonly counts: Uint16Array;
  private distinct = 0;
  private total = 0;
  private waiters: Array<() => void> = [];

  constructor(readonly n: number) {
    this.counts = new Uint16Array(n);
  }

  /** Records one handling of item `i`. */
  hit(i: number): void {
    if (!Number.isInteger(i) || i < 0 || i >= this.n) throw new VerificationError(`handled an unknown item ${String(i)}`);
    this.total++;
    if (this.counts[i] === 0) this.distinct++;
    this.counts[i] = Math.min(0xffff, (this.counts[i] as number) + 1);
    if (this.distinct === this.n) this.wake();
  }

  /** Number of handlings so far, duplicates included. */
  get handled(): number {
    return this.total;
  }

  /** Resolves once every item was handled at least once (or rejects after `timeoutMs`). */
  all(timeoutMs: number): Promise<void> {
    if (this.distinct === this.n) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new VerificationError(`only ${this.distinct} of ${this.n} items handled after ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Throws unless each item was handled exactly once. */
  verify(what: string): void {
    const missing: number[] = [];
    const twice: number[] = [];
    for (let i = 0; i < this.n; i++) {
      const c = this.counts[i] as number;
      if (c === 0) missing.push(i);
      else if (c > 1) twice.push(i);
    }
    check(
      missing.length === 0 && twice.length === 0,
      `${what}: ${missing.length} never handled (e.g. ${missing.slice(0, 5).join(',')}), ` +
        `${twice.length} handled more than once (e.g. ${twice.slice(0, 5).join(',')}) out of ${this.n}`,
    );
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}

/** Polls `probe` every `everyMs` until it returns true; throws a VerificationError after `timeoutMs`. */
export async function waitUntil(probe: () => Promise<boolean>, timeoutMs: number, what: string, everyMs = 10): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > until) throw new VerificationError(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
