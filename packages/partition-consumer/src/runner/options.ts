// The options of a partition worker and their checks: every duration and count is validated and
// defaulted here, once, so the worker itself only reads settled values.
import type { MeterProvider, TracerProvider } from '@opentelemetry/api';
import { invalidArgument } from '@q/schema';
import type { LoopFailure } from '@q/schema/internal';
import type { Request, RequestStore } from '@q/store';
import type { Logger } from '../logger.js';
import { requireInt, requireMs, requireName, requireOptionalObject } from '../validate.js';
import type { Outcome } from './outcome.js';

/** What `runPartitionWorker` reports through `onError` for each failed store call of its loops. */
export interface PartitionWorkerFailure extends LoopFailure<'rebalance' | 'poll' | 'write'> {
  /** Which loop failed (`write`: writing outcomes — results, retries, deferrals — after their retries). */
  operation: 'rebalance' | 'poll' | 'write';
}

/** Default of `PartitionWorkerOptions.maxPersistentFailures`. */
export const MAX_PERSISTENT_FAILURES = 5;
/** Default of `PartitionWorkerOptions.maxHandlerFailures`. */
const MAX_HANDLER_FAILURES = 5;

/** Options of {@link runPartitionWorker}. */
export interface PartitionWorkerOptions {
  /** An open store (the caller closes it after the worker returned). */
  store: RequestStore;
  /** The queue to serve. */
  queue: string;
  /** This dispatcher's unique lease-owner name. Default: `<hostname>-<8 hex>`. */
  owner?: string;
  /** Most handlers running at once (and most outcome writes pending before polling pauses). */
  concurrency: number;
  /** Most requests dispatched per poll. */
  batchSize: number;
  /** Lease and membership lifetime (ms); rebalance runs every `max(100, leaseTtlMs / 3)` ms. */
  leaseTtlMs: number;
  /** How long (ms) a partition being handed over waits for its work in flight. */
  drainTimeoutMs: number;
  /**
   * Handles one request. Cancelled requests are handed over too (`req.cancelled`), so the handler
   * can answer them. `signal` aborts when the request is no longer this worker's (its partition
   * was lost) or when a graceful stop timed out; whatever it returns then is fenced or put back.
   * A handler that throws (or returns no valid outcome, see {@link Outcome}) gets its request
   * run again after `errorRetryDelayMs` (doubling with each failure in a row, at most 5 min, never
   * past the request's deadline), with its envelope unchanged, up to `maxHandlerFailures` runs; a
   * failure after the deadline is the last. Then `failureResult` answers it, else it is set aside
   * (see `failureResult`). A request dispatched again
   * while an older dispatch of it is still being handled here (its partition moved away and
   * back) aborts the older handler at once.
   */
  handle(req: Request, signal: AbortSignal): Promise<Outcome>;
  /** Aborting it stops the worker gracefully: stop → keep settling until drained or `stopTimeoutMs` → close. */
  signal: AbortSignal;
  /** Pino-compatible logger. Default: silent. */
  logger?: Logger;
  /**
   * Spans `q.partition-consumer.*`. Each request's `q.partition-consumer.handle` span starts its
   * own trace, linked to the producer's span when the envelope is a JSON object with a W3C
   * `traceparent` field (a malformed envelope or traceparent just means no link). Absent: none.
   */
  tracerProvider?: TracerProvider;
  /** Metrics (partitions owned). Absent: the global meter provider. */
  meterProvider?: MeterProvider;
  /**
   * Called once when the worker starts, with a function that cuts short the poll loop's current
   * wait (the next poll runs as soon as handler slots allow): for a store whose `dispatch` holds
   * work back in memory and knows when some of it became admissible. Absent: polls keep their pace.
   */
  pollWake?: (wake: () => void) => void;
  /** Wait (ms) after a poll that found less than it could take. Default 1000. */
  pollIntervalMs?: number;
  /** Results written per ack transaction at most. Default `batchSize` (capped at `concurrency`). */
  ackBatchSize?: number;
  /** Longest wait (ms) of a result for its batch to fill. Default 5. */
  ackFlushMs?: number;
  /** How long (ms) a graceful stop waits for work in flight. Default `drainTimeoutMs`. */
  stopTimeoutMs?: number;
  /** Delay (ms, rounded up to whole seconds) before a request whose handler threw runs again. Default 1000. */
  // Every duration above is at most 2^31 - 1 ms (the longest Node timer); longer ones are INVALID_ARGUMENT.
  errorRetryDelayMs?: number;
  /**
   * Handler failures in a row (throws or invalid outcomes) of one request after which the worker
   * stops running it (counted per worker process). Default 5: runs 1, 2, 4, 8 s apart.
   */
  maxHandlerFailures?: number;
  /**
   * The answer to a request whose handler failed `maxHandlerFailures` times, or failed once its
   * deadline had passed: written as its result instead of running the handler again (which would
   * fail again and repeat its work). Absent, or not a valid result: the request is set aside — kept
   * pending but never dispatched again (`not_before` = `Number.MAX_SAFE_INTEGER`), logged at error
   * level and counted in `setAside`.
   */
  failureResult?: (req: Request, failure: HandlerFailure) => { route: string; payload: string; expiresAt?: number };
  /** Called for every failed rebalance or poll (see {@link PartitionWorkerFailure}); persistent ones are also logged at error level. */
  onError?: (failure: PartitionWorkerFailure) => void;
  /**
   * Identical persistent failures in a row (permission denied, undefined table, read-only,
   * prepared-statement errors) after which the worker stops as if aborted and rejects with that
   * error. Default 5.
   */
  maxPersistentFailures?: number;
}

/** Counters of one {@link runPartitionWorker} run. */
export interface PartitionWorkerStats {
  /** The owner name the worker leased under. */
  owner: string;
  /** Requests handed to `handle`. */
  dispatched: number;
  /** Results written. */
  acked: number;
  /** Outcomes refused because the request was no longer this worker's. */
  fenced: number;
  /** Requests put back by `{ retryAt }` or a failed handler. */
  retried: number;
  /** Requests put back by `{ defer }`. */
  deferred: number;
  /** Requests returned to pending because their handler was aborted. */
  undispatched: number;
  /** Requests whose outcome could not be written (redelivered by the next rebalance or close). */
  abandoned: number;
  /** Handlers that threw or returned no valid outcome. */
  failed: number;
  /** Requests set aside after repeated handler failures, without a `failureResult` (never dispatched again). */
  setAside: number;
}

/** Why `failureResult` is called. */
export interface HandlerFailure {
  /** Failures in a row of this request in this worker, the last one included. */
  failures: number;
  /** What went wrong the last time (`handler threw`, `no valid outcome: …`); names fields, never values. */
  reason: string;
  /** What the handler threw, if it threw. */
  error?: unknown;
}

/** The optional settings of {@link PartitionWorkerOptions}, defaulted. */
export interface ResolvedSettings {
  pollIntervalMs: number;
  ackBatchSize: number;
  ackFlushMs: number;
  stopTimeoutMs: number;
  errorRetryDelayMs: number;
  maxPersistentFailures: number;
  maxHandlerFailures: number;
}

/** Checks `opts` (`INVALID_ARGUMENT` naming the first bad field) and defaults the optional settings. */
export function resolveOptions(opts: PartitionWorkerOptions): ResolvedSettings {
  if (!opts || typeof opts !== 'object') throw invalidArgument('runPartitionWorker: options must be an object');
  if (!opts.store || typeof opts.store !== 'object') throw invalidArgument('runPartitionWorker: store must be a RequestStore');
  requireName('runPartitionWorker', opts.queue, 'queue');
  if (opts.owner !== undefined) requireName('runPartitionWorker', opts.owner, 'owner');
  requireInt('runPartitionWorker', opts.concurrency, 'concurrency', 1);
  requireInt('runPartitionWorker', opts.batchSize, 'batchSize', 1);
  // Durations drive timers (rebalance every leaseTtlMs / 3, polls, flushes, stop waits): a Node
  // timer longer than 2^31 - 1 ms fires after 1 ms, so such values are refused.
  requireMs('runPartitionWorker', opts.leaseTtlMs, 'leaseTtlMs', 1);
  requireMs('runPartitionWorker', opts.drainTimeoutMs, 'drainTimeoutMs', 0);
  if (typeof opts.handle !== 'function') throw invalidArgument('runPartitionWorker: handle must be a function');
  if (!(opts.signal instanceof AbortSignal)) throw invalidArgument('runPartitionWorker: signal must be an AbortSignal');
  requireOptionalObject('runPartitionWorker', opts.logger, 'logger', 'debug', 'info', 'warn', 'error');
  requireOptionalObject('runPartitionWorker', opts.tracerProvider, 'tracerProvider', 'getTracer');
  requireOptionalObject('runPartitionWorker', opts.meterProvider, 'meterProvider', 'getMeter');
  const pollIntervalMs = opts.pollIntervalMs ?? 1000;
  requireMs('runPartitionWorker', pollIntervalMs, 'pollIntervalMs', 1);
  // One ack transaction per dispatched batch by default: a commit per result batch is the cost.
  const ackBatchSize = opts.ackBatchSize ?? opts.batchSize;
  requireInt('runPartitionWorker', ackBatchSize, 'ackBatchSize', 1);
  const ackFlushMs = opts.ackFlushMs ?? 5;
  requireMs('runPartitionWorker', ackFlushMs, 'ackFlushMs', 0);
  const stopTimeoutMs = opts.stopTimeoutMs ?? opts.drainTimeoutMs;
  requireMs('runPartitionWorker', stopTimeoutMs, 'stopTimeoutMs', 0);
  const errorRetryDelayMs = opts.errorRetryDelayMs ?? 1000;
  requireMs('runPartitionWorker', errorRetryDelayMs, 'errorRetryDelayMs', 0);
  const maxPersistent = opts.maxPersistentFailures ?? MAX_PERSISTENT_FAILURES;
  requireInt('runPartitionWorker', maxPersistent, 'maxPersistentFailures', 1);
  if (opts.onError !== undefined && typeof opts.onError !== 'function') throw invalidArgument('runPartitionWorker: onError must be a function');
  const maxHandlerFailures = opts.maxHandlerFailures ?? MAX_HANDLER_FAILURES;
  requireInt('runPartitionWorker', maxHandlerFailures, 'maxHandlerFailures', 1);
  if (opts.failureResult !== undefined && typeof opts.failureResult !== 'function') {
    throw invalidArgument('runPartitionWorker: failureResult must be a function');
  }
  if (opts.pollWake !== undefined && typeof opts.pollWake !== 'function')
    throw invalidArgument('runPartitionWorker: pollWake must be a function');
  return { pollIntervalMs, ackBatchSize, ackFlushMs, stopTimeoutMs, errorRetryDelayMs, maxPersistentFailures: maxPersistent, maxHandlerFailures };
}
