import { databaseError } from './db-error.js';
import { QError, QErrorCode } from './errors.js';
import { FailureTracker, type FailureKind } from './failure.js';

/** What a long-running loop of q reports through its `onError` option for each failed database call. */
export interface LoopFailure<Op extends string = string> {
  /** Which loop failed. */
  operation: Op;
  /** The failure as a `QError` (its `cause` is the driver's error). */
  error: QError;
  /** `persistent` (retrying cannot help: permission, undefined table, read-only, prepared statements) or `transient`. */
  kind: FailureKind;
  /** The SQLSTATE, when the database sent one. */
  sqlState?: string;
  /** Identical failures in a row so far, this one included. */
  count: number;
  /** True when this failure stops the worker. */
  fatal: boolean;
}

/** Options of {@link FailureWatch}. */
export interface FailureWatchOptions<Op extends string> {
  /** What stops: `worker`, `partition worker` (in log messages and the fatal error's message). */
  owner: string;
  /** The loops watched, each with its own run of identical failures. */
  operations: readonly Op[];
  /** Identical persistent failures in a row (of one operation) after which the owner stops. */
  maxPersistent: number;
  /** Where failures are logged (the `warn` and `error` of q's `Logger`). */
  logger: { warn(fields: Record<string, unknown>, msg?: string): void; error(fields: Record<string, unknown>, msg?: string): void };
  /** The log fields of an error: `errorFields` of `@q/otel` (which depends on this package, not the reverse). */
  errorFields: (err: unknown) => Record<string, unknown>;
  /** Fields added to each log line (the queue, say). */
  fields?: Record<string, unknown>;
  /** Told of each failure; a throw is logged, never passed on. */
  onError?: (failure: LoopFailure<Op>) => void;
  /** Stops the owner with `error`; called once, by the first failure that is fatal. */
  stop: (error: QError) => void;
}

/**
 * The guard of a long-running loop against retrying silently forever: the job worker's
 * (`@q/job-worker`) and the partition worker's (`@q/partition-consumer`). Each failure is sorted by
 * `classifyFailure`: a persistent one — permission denied, an undefined table or function, a
 * read-only transaction, a prepared statement a pooler lost — is logged at error level at once and,
 * after `maxPersistent` identical ones in a row of the same operation (any success in between
 * resets the count), stops the owner with that error; a transient one (connection loss, failover,
 * serialization) is logged as a warning and the loop retries. Every failure is passed to `onError`.
 */
export class FailureWatch<Op extends string> {
  readonly #opts: FailureWatchOptions<Op>;
  readonly #trackers = new Map<Op, FailureTracker>();
  #fatal: QError | undefined;

  constructor(opts: FailureWatchOptions<Op>) {
    this.#opts = opts;
    for (const op of opts.operations) this.#trackers.set(op, new FailureTracker({ maxPersistent: opts.maxPersistent }));
  }

  /** The error the owner stopped with, once a persistent failure repeated `maxPersistent` times. */
  get fatal(): QError | undefined {
    return this.#fatal;
  }

  /** Records a success of `operation`: its run of identical failures is over. */
  succeeded(operation: Op): void {
    this.#tracker(operation).success();
  }

  /**
   * Records a failure of `operation`, logs it (`message`, at error level when persistent), reports
   * it, and stops the owner when it must. Only the first failure that stops the owner is fatal
   * (another loop may reach its bound too).
   */
  failed(operation: Op, err: unknown, message: string): LoopFailure<Op> {
    const v = this.#tracker(operation).observe(err);
    const fatal = v.stop && !this.#fatal;
    const error = err instanceof QError ? err : databaseError(operation, err);
    const fields = {
      ...this.#opts.errorFields(error),
      ...this.#opts.fields,
      operation,
      kind: v.kind,
      reason: v.reason,
      sqlstate: v.sqlState,
      count: v.count,
    };
    if (v.kind === 'persistent') {
      this.#opts.logger.error(fields, `${message}; persistent database failure${fatal ? `, ${this.#opts.owner} stopping` : ''}`);
    } else {
      this.#opts.logger.warn(fields, message);
    }
    const failure: LoopFailure<Op> = { operation, error, kind: v.kind, sqlState: v.sqlState, count: v.count, fatal };
    try {
      this.#opts.onError?.(failure);
    } catch (cbErr) {
      // A throwing callback must not break the loop it reports on.
      this.#opts.logger.warn(this.#opts.errorFields(cbErr), 'onError callback threw');
    }
    if (fatal) {
      this.#fatal = new QError(
        error.code === QErrorCode.CONNECTION ? QErrorCode.CONFIG : error.code,
        `${this.#opts.owner} stopped after ${v.count} identical ${operation} failures: ${v.reason}: ${error.message}`,
        { cause: error },
      );
      this.#opts.stop(this.#fatal);
    }
    return failure;
  }

  #tracker(operation: Op): FailureTracker {
    const tracker = this.#trackers.get(operation);
    if (!tracker) throw new RangeError(`${this.#opts.owner}: no failure watch for operation ${operation}`);
    return tracker;
  }
}
