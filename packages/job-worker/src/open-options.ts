import type { OpenOptions } from '@q/store/jobs';
import { invalidArgument } from '@q/schema';
import { LOGGER_METHODS, checkOptionalFunction, checkOptionalMethods, checkOptionsObject, checkProviders } from '@q/schema/internal';
import type { Logger } from './logger.js';
import type { ManagedWorkerOptions, WorkerStopped } from './managed-workers.js';
import { checkWorkerObjects, resolveOptions } from './options.js';

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
  /**
   * Structured logger (pino-compatible) of the queue and its workers. Default: warnings and
   * errors to stderr, nothing for routine work (see `defaultLogger`); `silentLogger` for none.
   */
  logger?: Logger;
  /**
   * Called when the worker of a queue stops for good: `worker.maxPersistentFailures` identical
   * persistent database failures in a row (a revoked grant, a dropped schema). It is not
   * restarted (see `JobQueue.health`); it is also logged at error level.
   */
  onWorkerStopped?: (stopped: WorkerStopped) => void;
  /** Settings of every worker `work` starts (lease, retry, poll and prefetch settings). */
  worker?: ManagedWorkerOptions;
  /** How long `close` waits for jobs in flight (ms). Default 30 000. */
  closeTimeoutMs?: number;
  /**
   * `false`: `work` registers handlers but starts no worker, so no job runs in this process until
   * `drain` of `@q/job-worker/testing` runs the due ones (for tests). Default `true`.
   */
  startWorkers?: boolean;
}

/** Throws `INVALID_ARGUMENT` for malformed queue-level options (the store checks its own). */
export function checkOpenOptions(opts: unknown): asserts opts is JobQueueOpenOptions {
  checkOptionsObject('JobQueue.open', opts);
  const o = opts as JobQueueOpenOptions;
  checkOptionalMethods('JobQueue.open', 'logger', o.logger, LOGGER_METHODS);
  checkOptionalFunction('JobQueue.open', 'onWorkerStopped', o.onWorkerStopped);
  checkProviders('JobQueue.open', o);
  if (o.queues !== undefined && (!Array.isArray(o.queues) || o.queues.some((q) => typeof q !== 'string' || q === ''))) {
    throw invalidArgument('JobQueue.open: queues must be an array of queue names');
  }
  if (o.worker !== undefined) {
    if (typeof o.worker !== 'object' || o.worker === null) throw invalidArgument('JobQueue.open: worker must be an object');
    // Checked now, not when `work` first starts a worker (after the store opened).
    checkWorkerObjects('JobQueue.open: worker', o.worker);
    try {
      resolveOptions({ ...o.worker, queues: ['default'], concurrency: 1 });
    } catch (err) {
      if (err instanceof Error) err.message = `JobQueue.open: worker: ${err.message}`;
      throw err;
    }
  }
  if (o.startWorkers !== undefined && typeof o.startWorkers !== 'boolean') throw invalidArgument('JobQueue.open: startWorkers must be a boolean');
  if (o.closeTimeoutMs !== undefined && (typeof o.closeTimeoutMs !== 'number' || !(o.closeTimeoutMs >= 0))) {
    throw invalidArgument('JobQueue.open: closeTimeoutMs must be a non-negative number');
  }
}
