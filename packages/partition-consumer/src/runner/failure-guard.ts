import { QError, QErrorCode } from '@q/schema';
import { FailureTracker, databaseError } from '@q/schema/internal';
import { errorFields, type Logger } from '../logger.js';

/** What `runPartitionWorker` reports through `onError` for each failed store call of its loops. */
export interface PartitionWorkerFailure {
  /** Which loop failed (`write`: writing outcomes — results, retries, deferrals — after their retries). */
  operation: 'rebalance' | 'poll' | 'write';
  /** The failure as a `QError` (its `cause` is the driver's error). */
  error: QError;
  /** `persistent` (retrying cannot help: permission, undefined table, read-only, prepared statements) or `transient`. */
  kind: 'persistent' | 'transient';
  /** The SQLSTATE, when the database sent one. */
  sqlState?: string;
  /** Identical failures in a row so far, this one included. */
  count: number;
  /** True when this failure stops the worker. */
  fatal: boolean;
}

/** Default of `PartitionWorkerOptions.maxPersistentFailures`. */
export const MAX_PERSISTENT_FAILURES = 5;

/**
 * Sorts the loops' failures (`classifyFailure` of `@q/schema`): a persistent one is logged at
 * error level at once and, after `max` identical ones in a row, stops the worker with that error;
 * a transient one is a warning and the loop retries as before.
 */
export class FailureGuard {
  readonly #trackers: Record<PartitionWorkerFailure['operation'], FailureTracker>;
  #fatal: QError | undefined;
  readonly #log: Logger;
  readonly #queue: string;
  readonly #onError: ((f: PartitionWorkerFailure) => void) | undefined;
  readonly #stop: () => void;

  constructor(log: Logger, queue: string, max: number, onError: ((f: PartitionWorkerFailure) => void) | undefined, stop: () => void) {
    this.#log = log;
    this.#queue = queue;
    this.#onError = onError;
    this.#stop = stop;
    this.#trackers = {
      rebalance: new FailureTracker({ maxPersistent: max }),
      poll: new FailureTracker({ maxPersistent: max }),
      write: new FailureTracker({ maxPersistent: max }),
    };
  }

  /** The error the worker stops with, once a persistent failure repeated `max` times. */
  get fatal(): QError | undefined {
    return this.#fatal;
  }

  succeeded(op: PartitionWorkerFailure['operation']): void {
    this.#trackers[op].success();
  }

  /** Records a failure; logs it (error level when persistent) and stops the worker when it must. */
  failed(op: PartitionWorkerFailure['operation'], err: unknown, message: string): void {
    const v = this.#trackers[op].observe(err);
    // Only the first failure that stops the worker is fatal (the other loop may reach its bound too).
    const fatal = v.stop && !this.#fatal;
    const error = err instanceof QError ? err : databaseError(op, err);
    const fields = { ...errorFields(error), queue: this.#queue, kind: v.kind, reason: v.reason, sqlstate: v.sqlState, count: v.count };
    if (v.kind === 'persistent') this.#log.error(fields, fatal ? `${message}; persistent, partition worker stopping` : `${message}; persistent`);
    else this.#log.warn(fields, message);
    try {
      this.#onError?.({ operation: op, error, kind: v.kind, sqlState: v.sqlState, count: v.count, fatal });
    } catch (cbErr) {
      this.#log.warn(errorFields(cbErr), 'onError callback threw');
    }
    if (!fatal) return;
    this.#fatal = new QError(
      error.code === QErrorCode.CONNECTION ? QErrorCode.CONFIG : error.code,
      `partition worker stopped after ${v.count} identical ${op} failures: ${v.reason}: ${error.message}`,
      { cause: error },
    );
    this.#stop();
  }
}
