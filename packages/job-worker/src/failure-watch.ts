import type { JobMetrics } from '@q/otel';
import { QError, QErrorCode } from '@q/schema';
import { FailureTracker, databaseError } from '@q/schema/internal';
import { errorFields, type Logger } from './logger.js';

/** What a worker reports through `WorkerOptions.onError` for each database failure of its loops. */
export interface WorkerFailure {
  /** Which loop failed: `claim`, `maintenance`, `complete` (writing attempt outcomes) or `schedules` (the scheduler's tick). */
  operation: 'claim' | 'maintenance' | 'complete' | 'schedules';
  /** The failure as a `QError` (its `cause` is the driver's error). */
  error: QError;
  /** `persistent` (retrying cannot help) or `transient` (retried with backoff). */
  kind: 'persistent' | 'transient';
  /** The SQLSTATE, when the database sent one. */
  sqlState?: string;
  /** Identical failures in a row so far, this one included. */
  count: number;
  /** True when this failure stops the worker. */
  fatal: boolean;
}

/** Options of {@link FailureWatch}. */
export interface FailureWatchOptions {
  logger: Logger;
  metrics?: JobMetrics;
  /** Identical persistent failures in a row after which the worker stops. */
  maxPersistent: number;
  onError?: (failure: WorkerFailure) => void;
  /** Stops the worker with `error` (called once). */
  stop: (error: QError) => void;
}

/**
 * The worker's guard against retrying silently forever. Each failure of the claim loop, the
 * maintenance or an outcome write is classified (`classifyFailure` of `@q/schema`): a persistent one — permission
 * denied, an undefined table or function, a read-only transaction, a prepared statement a pooler
 * lost — is logged at error level at once and, after `maxPersistent` identical ones in a row
 * (any success in between resets the count), stops the worker with that error; a transient one
 * (connection loss, failover, serialization) is logged as a warning and retried with backoff.
 * Every failure is counted in `q.jobs.worker_failures` and passed to `onError`.
 */
export class FailureWatch {
  readonly #opts: FailureWatchOptions;
  readonly #trackers: Record<WorkerFailure['operation'], FailureTracker>;
  #fatal: QError | undefined;

  constructor(opts: FailureWatchOptions) {
    this.#opts = opts;
    this.#trackers = {
      claim: new FailureTracker({ maxPersistent: opts.maxPersistent }),
      maintenance: new FailureTracker({ maxPersistent: opts.maxPersistent }),
      complete: new FailureTracker({ maxPersistent: opts.maxPersistent }),
      schedules: new FailureTracker({ maxPersistent: opts.maxPersistent }),
    };
  }

  /** The error the worker stopped with, if it did. */
  get fatal(): QError | undefined {
    return this.#fatal;
  }

  /** Records a success of `operation`: its run of identical failures is over. */
  succeeded(operation: WorkerFailure['operation']): void {
    this.#trackers[operation].success();
  }

  /**
   * Records a failure of `operation`: returns null when the worker must stop (it has been told
   * to), otherwise how long to wait before retrying (doubling for a run of transient failures).
   */
  failed(operation: WorkerFailure['operation'], err: unknown): number | null {
    if (this.#fatal) return null;
    const v = this.#trackers[operation].observe(err);
    const error = err instanceof QError ? err : databaseError(operation, err);
    const fields = { ...errorFields(error), operation, kind: v.kind, reason: v.reason, sqlstate: v.sqlState, count: v.count };
    this.#opts.metrics?.workerFailures?.add(1, { 'q.operation': operation, 'error.kind': v.kind, 'db.sqlstate': v.sqlState ?? '' });
    if (v.kind === 'persistent') {
      this.#opts.logger.error(fields, v.stop ? 'persistent database failure, worker stopping' : 'persistent database failure');
    } else {
      this.#opts.logger.warn(fields, `${operation} failed, retrying`);
    }
    this.#report({ operation, error, kind: v.kind, sqlState: v.sqlState, count: v.count, fatal: v.stop });
    if (!v.stop) return v.kind === 'transient' ? Math.min(RETRY_BASE_MS * 2 ** (Math.min(v.count, 8) - 1), RETRY_MAX_MS) : RETRY_BASE_MS;
    this.#fatal = new QError(
      error.code === QErrorCode.CONNECTION ? QErrorCode.CONFIG : error.code,
      `worker stopped after ${v.count} identical ${operation} failures: ${v.reason}: ${error.message}`,
      { cause: error },
    );
    this.#opts.stop(this.#fatal);
    return null;
  }

  #report(failure: WorkerFailure): void {
    try {
      this.#opts.onError?.(failure);
    } catch (err) {
      // A throwing callback must not break the loop it reports on.
      this.#opts.logger.warn(errorFields(err), 'onError callback threw');
    }
  }
}

/** The default of `WorkerOptions.maxPersistentFailures`. */
export const MAX_PERSISTENT_FAILURES = 5;
/** First retry delay after a failed claim; transient failures in a row double it up to {@link RETRY_MAX_MS}. */
export const RETRY_BASE_MS = 2_000;
/** Longest retry delay after transient failures (a failover that takes longer is still retried). */
export const RETRY_MAX_MS = 16_000;
