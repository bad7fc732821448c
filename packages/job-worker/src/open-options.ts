import type { OpenOptions } from '@q/store/jobs';
import { invalidArgument } from '@q/schema';
import type { Logger } from './logger.js';
import type { ManagedWorkerOptions } from './managed-workers.js';

/** Counter of jobs enqueued to a queue that no worker of the enqueuing process serves. */
export const METRIC_UNSERVED_ENQUEUES = 'q.jobs.unserved_enqueues';

/** Default bound of `JobQueue.close`'s drain (ms). */
export const DEFAULT_CLOSE_TIMEOUT_MS = 30_000;

/**
 * Options of `JobQueue.open`: the job store's {@link OpenOptions} (`schema`, `maxConns`,
 * `migrate`, telemetry providers, …) plus the queue's own.
 */
export interface JobQueueOpenOptions extends OpenOptions {
  /**
   * Queues that workers of other processes serve. Enqueueing to a queue neither listed here nor
   * served by `work` in this process is counted (`q.jobs.unserved_enqueues`) and logged once.
   */
  queues?: string[];
  /** Structured logger (pino-compatible) of the queue and its workers. Default silent. */
  logger?: Logger;
  /** Settings of every worker `work` starts (lease, retry, poll and prefetch settings). */
  worker?: ManagedWorkerOptions;
  /** How long `close` waits for jobs in flight (ms). Default 30 000. */
  closeTimeoutMs?: number;
}

/** Throws `INVALID_ARGUMENT` for malformed queue-level options (the store checks its own). */
export function checkOpenOptions(opts: unknown): asserts opts is JobQueueOpenOptions {
  if (typeof opts !== 'object' || opts === null) throw invalidArgument('JobQueue.open: options must be an object');
  const o = opts as JobQueueOpenOptions;
  if (o.queues !== undefined && (!Array.isArray(o.queues) || o.queues.some((q) => typeof q !== 'string' || q === ''))) {
    throw invalidArgument('JobQueue.open: queues must be an array of queue names');
  }
  if (o.worker !== undefined && (typeof o.worker !== 'object' || o.worker === null)) {
    throw invalidArgument('JobQueue.open: worker must be an object');
  }
  if (o.closeTimeoutMs !== undefined && (typeof o.closeTimeoutMs !== 'number' || !(o.closeTimeoutMs >= 0))) {
    throw invalidArgument('JobQueue.open: closeTimeoutMs must be a non-negative number');
  }
}
