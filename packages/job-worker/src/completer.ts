import type { JobOutcome, JobStore } from '@q/store';
import { errorFields, type Logger } from './logger.js';

const MAX_BATCH = 1_000;

interface Pending {
  outcome: JobOutcome;
  resolve: (written: boolean) => void;
}

/**
 * Batches attempt outcomes: one write is in flight at a time, and everything submitted meanwhile
 * goes into the next statement. A failed batch is retried one outcome at a time, so one bad row
 * cannot lose the others. Writes never use a caller's abort signal: a draining worker still
 * records what finished.
 */
export class Completer {
  readonly #store: JobStore;
  readonly #logger: Logger;
  #queue: Pending[] = [];
  #flushing = false;

  constructor(store: JobStore, logger: Logger) {
    this.#store = store;
    this.#logger = logger;
  }

  /** Queues an outcome; resolves true once written, false when fenced or not writable. */
  submit(outcome: JobOutcome): Promise<boolean> {
    return new Promise((resolve) => {
      this.#queue.push({ outcome, resolve });
      if (!this.#flushing) {
        this.#flushing = true;
        void this.#flush();
      }
    });
  }

  async #flush(): Promise<void> {
    // The flag is cleared in the same tick as the final empty-queue check, so a submit can never
    // slip in between and wait for a flush that is not coming.
    try {
      while (this.#queue.length > 0) await this.#writeNext();
    } finally {
      this.#flushing = false;
    }
  }

  async #writeNext(): Promise<void> {
    const batch = this.#queue.splice(0, MAX_BATCH);
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
