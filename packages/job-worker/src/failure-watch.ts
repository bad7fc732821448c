import type { JobMetrics } from '@q/otel';
import type { QError } from '@q/schema';
import { FailureWatch, type LoopFailure } from '@q/schema/internal';
import { errorFields, type Logger } from './logger.js';

/** What a worker reports through `WorkerOptions.onError` for each database failure of its loops. */
export interface WorkerFailure extends LoopFailure<'claim' | 'maintenance' | 'complete' | 'schedules'> {
  /** Which loop failed: `claim`, `maintenance`, `complete` (writing attempt outcomes) or `schedules` (the scheduler's tick). */
  operation: 'claim' | 'maintenance' | 'complete' | 'schedules';
}

/** Options of {@link WorkerFailureWatch}. */
export interface WorkerFailureWatchOptions {
  logger: Logger;
  metrics?: JobMetrics;
  /** Identical persistent failures in a row after which the worker stops. */
  maxPersistent: number;
  onError?: (failure: WorkerFailure) => void;
  /** Stops the worker with `error` (called once). */
  stop: (error: QError) => void;
}

/**
 * The worker's guard against retrying silently forever: the `FailureWatch` of `@q/schema/internal`
 * (the partition worker's too) over the claim loop, the maintenance, outcome writes and the
 * scheduler, plus what only the worker does: the retry delay after a failure, and the count of
 * every failure in `q.jobs.worker_failures`.
 */
export class WorkerFailureWatch extends FailureWatch<WorkerFailure['operation']> {
  readonly #metrics: JobMetrics | undefined;

  constructor(opts: WorkerFailureWatchOptions) {
    super({
      owner: 'worker',
      operations: ['claim', 'maintenance', 'complete', 'schedules'],
      maxPersistent: opts.maxPersistent,
      logger: opts.logger,
      errorFields,
      onError: opts.onError,
      stop: opts.stop,
    });
    this.#metrics = opts.metrics;
  }

  /**
   * Records a failure of `operation`: returns null when the worker must stop (it has been told
   * to), otherwise how long to wait before retrying (doubling for a run of transient failures).
   */
  retryAfter(operation: WorkerFailure['operation'], err: unknown): number | null {
    if (this.fatal) return null;
    const f = this.failed(operation, err, `${operation} failed`);
    this.#metrics?.workerFailures?.add(1, { 'q.operation': operation, 'error.kind': f.kind, 'db.sqlstate': f.sqlState ?? '' });
    if (f.fatal) return null;
    return f.kind === 'transient' ? Math.min(RETRY_BASE_MS * 2 ** (Math.min(f.count, 8) - 1), RETRY_MAX_MS) : RETRY_BASE_MS;
  }
}

/** The default of `WorkerOptions.maxPersistentFailures`. */
export const MAX_PERSISTENT_FAILURES = 5;
/** First retry delay after a failed claim; transient failures in a row double it up to {@link RETRY_MAX_MS}. */
export const RETRY_BASE_MS = 2_000;
/** Longest retry delay after transient failures (a failover that takes longer is still retried). */
export const RETRY_MAX_MS = 16_000;
