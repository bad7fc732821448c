import { QErrorCode, isQError } from '@q/schema';
import type { Completion } from '@q/store';
import type { Consumer } from '../consumer.js';
import { errorFields, type Logger } from '../logger.js';
import { STORE_RETRIES, withRetries } from './retries.js';

/**
 * What became of one result: written, refused (fenced: no longer ours), abandoned after failed
 * writes, or refused by the store as bad input (`invalid`: writing it again would fail again).
 */
export type AckOutcome = 'acked' | 'fenced' | 'abandoned' | 'invalid';

interface Pending {
  completion: Completion;
  resolve: (o: AckOutcome) => void;
}

/**
 * Collects results and writes them with one `Consumer.ack` (one transaction) per batch: when
 * `size` are waiting, when the owner calls {@link AckBatcher.flush} (nothing else can join), or
 * `flushMs` after the first one arrived. Only transient (`CONNECTION`) errors are retried; a
 * batch that still fails (or fails otherwise) is abandoned (the next rebalance returns it to
 * pending). A batch the store refuses as bad input (`INVALID_ARGUMENT`, nothing written) is
 * written again one result at a time, so a bad result fails alone, never its neighbours.
 */
export class AckBatcher {
  #pending: Pending[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #writing = new Set<Promise<void>>();

  readonly #consumer: Consumer;
  readonly #size: number;
  readonly #flushMs: number;
  readonly #log: Logger;
  /** Told of every batch written (no error) and every one abandoned after its retries (the error). */
  readonly #onWrite: (err?: unknown) => void;

  constructor(consumer: Consumer, size: number, flushMs: number, log: Logger, onWrite: (err?: unknown) => void = () => undefined) {
    this.#consumer = consumer;
    this.#size = size;
    this.#flushMs = flushMs;
    this.#log = log;
    this.#onWrite = onWrite;
  }

  /** Queues one result; resolves once it was written, fenced, abandoned or refused. Never rejects. */
  add(completion: Completion): Promise<AckOutcome> {
    return new Promise<AckOutcome>((resolve) => {
      this.#pending.push({ completion, resolve });
      if (this.#pending.length >= this.#size) this.flush();
      else this.#timer ??= setTimeout(() => this.flush(), this.#flushMs);
    });
  }

  /** Writes everything queued and waits for every write in progress. */
  async drain(): Promise<void> {
    this.flush();
    while (this.#writing.size > 0) await Promise.all([...this.#writing]);
  }

  /** Writes what is queued now (no-op when nothing is). */
  flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#pending.length === 0) return;
    const batch = this.#pending;
    this.#pending = [];
    const w = this.#write(batch).finally(() => this.#writing.delete(w));
    this.#writing.add(w);
  }

  async #write(batch: Pending[]): Promise<void> {
    const completions = batch.map((p) => p.completion);
    try {
      const ok = await withRetries(
        () => this.#consumer.ack(completions),
        STORE_RETRIES,
        (err, attempt) => this.#log.warn({ ...errorFields(err), attempt, count: batch.length }, 'ack failed; retrying'),
      );
      let fenced = 0;
      batch.forEach((p, i) => {
        if (!ok[i]) fenced++;
        p.resolve(ok[i] ? 'acked' : 'fenced');
      });
      if (fenced > 0) this.#log.info({ queue: this.#consumer.queue, fenced }, 'results fenced (requests no longer owned)');
      this.#onWrite();
    } catch (err) {
      if (isQError(err, QErrorCode.INVALID_ARGUMENT)) {
        if (batch.length > 1) {
          // Nothing was written (bad input is refused before any statement): find the bad one(s).
          this.#log.warn({ ...errorFields(err), count: batch.length }, 'ack refused; writing the batch one result at a time');
          await Promise.all(batch.map((p) => this.#write([p])));
          return;
        }
        this.#log.error({ ...errorFields(err), queue: this.#consumer.queue }, 'result refused by the store');
        for (const p of batch) p.resolve('invalid');
        return;
      }
      this.#consumer.abandon(...completions.map((c) => ({ id: c.id, token: c.token, attempt: c.attempt })));
      this.#log.error({ ...errorFields(err), count: batch.length }, 'ack failed; requests abandoned for redelivery');
      for (const p of batch) p.resolve('abandoned');
      this.#onWrite(err);
    }
  }
}
