import type { JobOutcome, JobStore } from '@q/store';
import { errorFields, type Logger } from './logger.js';

const MAX_BATCH = 1_000;

/** An outcome waiting to be written, and how to tell its submitter the result. */
export interface PendingOutcome {
  outcome: JobOutcome;
  resolve: (written: boolean) => void;
}

/**
 * Batches attempt outcomes: one write of its own is in flight at a time, and everything
 * submitted meanwhile goes into the next statement. While `deferred()` holds, it writes nothing
 * itself: the worker's claim loop is about to {@link Completer.take} the outcomes and write them
 * in its complete-and-claim round trip; the worker calls {@link Completer.kick} when that stops
 * being so. A failed batch is retried one outcome at a time, so one bad row cannot lose the
 * others. Writes never use a caller's abort signal: a draining worker still records what finished.
 */
export class Completer {
  readonly #store: JobStore;
  readonly #logger: Logger;
  readonly #deferred: () => boolean;
  #queue: PendingOutcome[] = [];
  #flushing = false;

  constructor(store: JobStore, logger: Logger, deferred: () => boolean = () => false) {
    this.#store = store;
    this.#logger = logger;
    this.#deferred = deferred;
  }

  /** Queues an outcome; resolves true once written, false when fenced or not writable. */
  submit(outcome: JobOutcome): Promise<boolean> {
    return new Promise((resolve) => {
      this.#queue.push({ outcome, resolve });
      this.kick();
    });
  }

  /** Outcomes waiting (not being written). */
  get pending(): number {
    return this.#queue.length;
  }

  /** Starts writing what waits, unless deferred or already writing. */
  kick(): void {
    if (this.#flushing || this.#queue.length === 0 || this.#deferred()) return;
    this.#flushing = true;
    void this.#flush();
  }

  /** Hands up to `max` waiting outcomes to a caller that writes them; it must then {@link settle} or {@link restore} them. */
  take(max = MAX_BATCH): PendingOutcome[] {
    return this.#queue.splice(0, max);
  }

  /** Reports the caller's write of taken outcomes (`written[i]` for `taken[i]`). */
  settle(taken: readonly PendingOutcome[], written: readonly boolean[]): void {
    taken.forEach((p, i) => p.resolve(written[i] === true));
  }

  /** Gives back taken outcomes whose write failed: they are written now, on their own (one by one if need be). */
  restore(taken: readonly PendingOutcome[]): void {
    if (taken.length === 0) return;
    void this.#write([...taken]);
  }

  async #flush(): Promise<void> {
    // The flag is cleared in the same tick as the final check, so a submit can never slip in
    // between and wait for a flush that is not coming (a deferred one is kicked by the worker).
    try {
      while (this.#queue.length > 0 && !this.#deferred()) await this.#write(this.#queue.splice(0, MAX_BATCH));
    } finally {
      this.#flushing = false;
    }
  }

  async #write(batch: PendingOutcome[]): Promise<void> {
    try {
      const written = await this.#store.complete(batch.map((p) => p.outcome));
      batch.forEach((p, i) => p.resolve(written[i] === true));
    } catch (err) {
      if (batch.length > 1) this.#logger.warn(errorFields(err), 'batched outcome write failed, writing one by one');
      for (const p of batch) {
        try {
          p.resolve((await this.#store.complete([p.outcome]))[0] === true);
        } catch (e) {
          this.#logger.error({ ...errorFields(e), job_id: p.outcome.id }, 'could not record job outcome');
          p.resolve(false);
        }
      }
    }
  }
}
