import { JobAbortedError } from './errors.js';

/** Writes one progress value (JSON-checked by the store); resolves false when fenced. */
export type ProgressWriter = (value: unknown) => Promise<boolean>;

/** Least time between two progress writes of one job (ms): a tight loop writes about 4 a second. */
export const PROGRESS_INTERVAL_MS = 250;

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** Nothing is waiting to be written. */
const NONE: unique symbol = Symbol('none');

/**
 * A job attempt's progress (`ctx.progress`), coalesced: the first value is written at once, and
 * then at most one write per {@link PROGRESS_INTERVAL_MS}, each carrying the latest value
 * reported (the values in between are never written). Each call's promise resolves once a value
 * at least as recent as its own is durable, and rejects with a `JobAbortedError` (`lease_lost`)
 * when the write was fenced (the lease is lost; every later call rejects at once) or with the
 * store's error when it failed. {@link ProgressReporter.settle} writes what is pending now: the
 * worker calls it before it records the attempt's outcome, so the last value is always stored.
 */
export class ProgressReporter {
  readonly #write: ProgressWriter;
  #pending: unknown = NONE;
  #waiters: Waiter[] = [];
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> | undefined;
  #lastWriteAt = Number.NEGATIVE_INFINITY;
  #fenced = false;
  /** Writes sent (for tests and logs). */
  writes = 0;

  /** @param write persists one value (the worker passes a fenced store write). */
  constructor(write: ProgressWriter) {
    this.#write = write;
  }

  /** Reports `value` (already checked and copied: a JSON value of at most `MAX_PROGRESS_BYTES` bytes). */
  report(value: unknown): Promise<void> {
    if (this.#fenced) return Promise.reject(new JobAbortedError('lease_lost'));
    this.#pending = value;
    const done = new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }));
    // Handled here too: a call nobody awaits (a loop reporting as it goes) never becomes an
    // unhandled rejection that would end the process; whoever awaits it still sees the error.
    done.catch(() => undefined);
    this.#schedule();
    return done;
  }

  /** Writes the pending value now (after a write under way) and resolves once none is left; never rejects. */
  async settle(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#writing !== undefined || this.#pending !== NONE) {
      if (this.#writing !== undefined) await this.#writing;
      else {
        clearTimeout(this.#timer);
        this.#timer = undefined;
        this.#flush();
      }
    }
  }

  #schedule(): void {
    if (this.#writing !== undefined || this.#timer !== undefined) return; // picked up when that ends
    const wait = this.#lastWriteAt + PROGRESS_INTERVAL_MS - performance.now();
    if (wait <= 0) return this.#flush();
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#flush();
    }, wait);
    this.#timer.unref();
  }

  #flush(): void {
    if (this.#pending === NONE) return;
    const value = this.#pending;
    const waiters = this.#waiters;
    this.#pending = NONE;
    this.#waiters = [];
    this.#lastWriteAt = performance.now();
    this.writes++;
    this.#writing = this.#write(value).then(
      (written) => {
        if (written) for (const w of waiters) w.resolve();
        else this.#fence(waiters);
      },
      (err: unknown) => {
        for (const w of waiters) w.reject(err);
      },
    );
    void this.#writing.finally(() => {
      this.#writing = undefined;
      if (this.#fenced) this.#fence(this.#waiters.splice(0));
      else if (this.#pending !== NONE) this.#schedule();
    });
  }

  #fence(waiters: Waiter[]): void {
    this.#fenced = true;
    this.#pending = NONE;
    for (const w of waiters) w.reject(new JobAbortedError('lease_lost'));
  }
}
