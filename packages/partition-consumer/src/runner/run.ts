import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { MeterProvider, TracerProvider } from '@opentelemetry/api';
import { qTracer, type Tracer } from '@q/otel';
import { invalidArgument, isQError } from '@q/schema';
import { checkCompletion, checkEnvelope, stampOf, type Completion, type Request, type Stamp, type Store } from '@q/store';
import { Consumer } from '../consumer.js';
import { errorFields, silentLogger, type Logger } from '../logger.js';
import { requireInt, requireMs, requireName, requireOptionalObject } from '../validate.js';
import { AckBatcher } from './ack-batcher.js';
import { FailureGuard, MAX_PERSISTENT_FAILURES, type PartitionWorkerFailure } from './failure-guard.js';
import { handleSpan } from './handle-span.js';
import { STORE_RETRIES, withRetries } from './retries.js';
import { Waker } from './waker.js';

/**
 * What a handler decided for one request:
 * - `{ result }` — done: the result is written to `result.route` (acked), `expiresAt` in Unix s
 *   (0 or absent = never expires);
 * - `{ retryAt, envelope? }` — run it again, not before `retryAt` (Unix s), optionally with a new
 *   envelope (e.g. a retry counter); the payload is kept;
 * - `{ defer }` — put it back unchanged, not dispatched again before `defer` (Unix s).
 *
 * Times may be fractional (`Date.now() / 1000 + 2`): they are rounded up to the next whole
 * second, so "not before" and "kept until" still hold; a `retryAt`/`defer` in the past (or
 * negative) means at once. The rest is checked exactly as the store checks it (`checkCompletion`,
 * `checkEnvelope` of `@q/store`): a route must be non-empty text without NUL or lone surrogates
 * of at most 2,048 bytes, a payload or envelope text without NUL or lone surrogates of at most
 * `MAX_VALUE_BYTES`, `expiresAt` not negative. An outcome that fails these checks counts as
 * "no valid outcome" (see `handle`): it is logged and fails that request alone.
 */
export type Outcome =
  { result: { route: string; payload: string; expiresAt?: number } } | { retryAt: number; envelope?: string } | { defer: number };

/** Options of {@link runPartitionWorker}. */
export interface PartitionWorkerOptions {
  /** An open store (the caller closes it after the worker returned). */
  store: Store;
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
   * retried after `errorRetryDelayMs`, with its envelope unchanged. A request dispatched again
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
}

/** Fastest rebalance beat, used while partitions are moving. */
const RAPID_BEAT_MS = 100;

/** Longest wait of a stop for outcome writes still in progress (each is bounded by its retries anyway). */
const SHUTDOWN_WRITE_MS = 5_000;

interface Job {
  req: Request;
  ctrl: AbortController;
  detached: boolean;
}

/**
 * A handler's outcome, checked and in the store's terms. `reason` of `invalid` says what was
 * wrong (it names fields, never values).
 */
type Settlement =
  | { kind: 'result'; completion: Completion }
  | { kind: 'retry'; at: number; envelope: string }
  | { kind: 'defer'; at: number }
  | { kind: 'invalid'; reason: string };

/** Identity of a request generation in the runner's maps (ids and tokens cannot contain NUL). */
const keyOfReq = (r: Request): string => `${r.id}\u0000${r.token}`;

/**
 * Runs a {@link Consumer} on `queue` until `signal` aborts: rebalances on the database clock,
 * polls while it has capacity, runs `handle` with bounded concurrency, writes results in batches,
 * retries and defers, retries failed store calls (3 tries, 100/200 ms apart) and abandons what
 * it still cannot write. On abort it stops gracefully: withdraws (its partitions drain to the
 * peers), keeps settling work until none is left or `stopTimeoutMs`, then closes (immediate
 * hand-over). Resolves with the run's counters; rejects on invalid options, and after a stop
 * caused by `maxPersistentFailures` identical persistent failures, with that error.
 */
export async function runPartitionWorker(opts: PartitionWorkerOptions): Promise<PartitionWorkerStats> {
  return new PartitionWorker(opts).run();
}

/** The default owner name: `<hostname>-<8 hex>`, unique per call. */
export function defaultOwner(): string {
  return `${hostname()}-${randomBytes(4).toString('hex')}`;
}

class PartitionWorker {
  readonly #consumer: Consumer;
  readonly #acks: AckBatcher;
  readonly #log: Logger;
  readonly #tracer: Tracer | undefined;
  readonly #stats: PartitionWorkerStats;
  readonly #running = new Set<Job>();
  /** The newest running dispatch of each request generation: an older one is stale at once. */
  readonly #latest = new Map<string, Job>();
  /** Outcome writes in progress (a handler's slot is free again once it returned). */
  #settling = 0;
  #stopping = false;
  #rebalancing = true;
  readonly #rebalanceWaker = new Waker();
  readonly #pollWaker = new Waker();
  readonly #settleWaker = new Waker();
  /** Cuts short the wait after a poll that found little: a stop, or partitions gained. */
  readonly #idleWaker = new Waker();
  readonly #firstRebalance: Promise<void>;
  #resolveFirst: () => void = () => undefined;
  readonly #pollIntervalMs: number;
  readonly #stopTimeoutMs: number;
  readonly #errorRetryDelayMs: number;
  readonly #guard: FailureGuard;
  /** Stops the worker from inside (a persistent failure), as the caller's signal does. */
  readonly #halt = new AbortController();

  readonly #opts: PartitionWorkerOptions;

  constructor(opts: PartitionWorkerOptions) {
    this.#opts = opts;
    if (!opts || typeof opts !== 'object') throw invalidArgument('runPartitionWorker: options are required');
    if (!opts.store || typeof opts.store !== 'object') throw invalidArgument('runPartitionWorker: store is required');
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
    this.#pollIntervalMs = opts.pollIntervalMs ?? 1000;
    requireMs('runPartitionWorker', this.#pollIntervalMs, 'pollIntervalMs', 1);
    // One ack transaction per dispatched batch by default: a commit per result batch is the cost.
    const ackBatchSize = opts.ackBatchSize ?? opts.batchSize;
    requireInt('runPartitionWorker', ackBatchSize, 'ackBatchSize', 1);
    const ackFlushMs = opts.ackFlushMs ?? 5;
    requireMs('runPartitionWorker', ackFlushMs, 'ackFlushMs', 0);
    this.#stopTimeoutMs = opts.stopTimeoutMs ?? opts.drainTimeoutMs;
    requireMs('runPartitionWorker', this.#stopTimeoutMs, 'stopTimeoutMs', 0);
    this.#errorRetryDelayMs = opts.errorRetryDelayMs ?? 1000;
    requireMs('runPartitionWorker', this.#errorRetryDelayMs, 'errorRetryDelayMs', 0);
    const maxPersistent = opts.maxPersistentFailures ?? MAX_PERSISTENT_FAILURES;
    requireInt('runPartitionWorker', maxPersistent, 'maxPersistentFailures', 1);
    if (opts.onError !== undefined && typeof opts.onError !== 'function') throw invalidArgument('runPartitionWorker: onError must be a function');

    const owner = opts.owner ?? defaultOwner();
    this.#log = opts.logger ?? silentLogger;
    this.#guard = new FailureGuard(this.#log, opts.queue, maxPersistent, opts.onError, () => this.#halt.abort());
    this.#tracer = qTracer(opts.tracerProvider);
    this.#consumer = new Consumer(opts.store, opts.queue, owner, {
      leaseTtlMs: opts.leaseTtlMs,
      drainTimeoutMs: opts.drainTimeoutMs,
      logger: this.#log,
      ...(opts.tracerProvider ? { tracerProvider: opts.tracerProvider } : {}),
      ...(opts.meterProvider ? { meterProvider: opts.meterProvider } : {}),
    });
    // A batch larger than `concurrency` could never fill (a request keeps its slot until written).
    this.#acks = new AckBatcher(this.#consumer, Math.min(ackBatchSize, opts.concurrency), ackFlushMs, this.#log);
    this.#firstRebalance = new Promise<void>((r) => (this.#resolveFirst = r));
    this.#stats = { owner, dispatched: 0, acked: 0, fenced: 0, retried: 0, deferred: 0, undispatched: 0, abandoned: 0, failed: 0 };
  }

  async run(): Promise<PartitionWorkerStats> {
    const { queue, signal } = this.#opts;
    if (signal.aborted) return { ...this.#stats }; // stopped before it started: touch nothing
    this.#log.info({ queue, owner: this.#stats.owner }, 'partition worker starting');
    const stopped = new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener('abort', () => resolve(), { once: true });
      this.#halt.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    void stopped.then(() => {
      this.#stopping = true;
      this.#pollWaker.wake();
      this.#idleWaker.wake();
    });

    const rebalanceLoop = this.#rebalanceLoop();
    await this.#firstRebalance;
    await this.#pollLoop();
    await stopped;

    // Graceful stop: withdraw (partitions drain to the peers), settle what is in flight.
    this.#consumer.stop();
    this.#rebalanceWaker.wake();
    await this.#waitSettled(Date.now() + this.#stopTimeoutMs);
    if (this.#running.size > 0) {
      this.#log.warn({ queue, inFlight: this.#running.size }, 'stop timeout; aborting handlers');
      for (const job of this.#running) job.ctrl.abort(new Error('partition worker stopping'));
      await this.#waitSettled(Date.now() + Math.min(1000, Math.max(100, this.#opts.leaseTtlMs / 3)));
      for (const job of [...this.#running]) this.#detach(job);
    }
    await this.#acks.drain();
    // Outcome writes are bounded by their retries; do not let a hung one hold the stop forever.
    await this.#waitSettled(Date.now() + SHUTDOWN_WRITE_MS);
    this.#rebalancing = false;
    this.#rebalanceWaker.wake();
    await rebalanceLoop;
    try {
      await withRetries(() => this.#consumer.close(), STORE_RETRIES);
    } catch (err) {
      this.#log.error({ ...errorFields(err), queue }, 'close failed; partitions are taken over after the lease TTL');
    }
    this.#log.info({ ...this.#stats, queue }, 'partition worker stopped');
    if (this.#guard.fatal) throw this.#guard.fatal;
    return { ...this.#stats };
  }

  // ---- rebalance ----

  async #rebalanceLoop(): Promise<void> {
    const interval = Math.max(100, Math.floor(this.#opts.leaseTtlMs / 3));
    // While partitions move (start, join/leave of a peer, hand-over) beat sooner: 100 ms, then
    // doubling back to `interval` once nothing changes. Draining partitions keep the fast beat so
    // they are released as soon as their work is settled, not a whole interval later.
    let fast = RAPID_BEAT_MS;
    let held = '';
    let active = new Set<number>();
    while (this.#rebalancing) {
      const started = Date.now();
      await this.#rebalanceOnce();
      this.#resolveFirst();
      if (!this.#rebalancing) break;
      const state = this.#consumer.inspect();
      const now = `${state.active.join(',')}|${state.draining.join(',')}`;
      fast = now !== held || state.draining.length > 0 ? RAPID_BEAT_MS : fast * 2;
      // New partitions to dispatch from: an idle poll loop need not sleep out its interval.
      if (state.active.some((p) => !active.has(p))) this.#idleWaker.wake();
      held = now;
      active = new Set(state.active);
      await this.#rebalanceWaker.wait(started + Math.min(interval, fast) - Date.now());
    }
  }

  async #rebalanceOnce(): Promise<void> {
    try {
      const now = await this.#opts.store.now();
      await this.#consumer.rebalance(now);
      this.#guard.succeeded('rebalance');
    } catch (err) {
      this.#guard.failed('rebalance', err, 'rebalance failed; retrying next beat');
    } finally {
      // Also after a failed rebalance: a partition found lost before the failing step is lost.
      this.#abortLost();
    }
  }

  /** Aborts handlers of requests dispatched under a lease this worker no longer holds. */
  #abortLost(): void {
    if (this.#running.size === 0) return;
    const held = new Set(this.#consumer.inspect().leases.map((l) => `${l.partition}:${l.epoch}`));
    for (const job of this.#running) {
      if (!job.ctrl.signal.aborted && !held.has(`${job.req.partition}:${job.req.epoch}`)) {
        job.ctrl.abort(new Error('partition lease lost'));
      }
    }
  }

  // ---- poll ----

  async #pollLoop(): Promise<void> {
    const { concurrency, batchSize } = this.#opts;
    // Poll once half a batch fits, not for every freed slot: fewer, fuller dispatches.
    const worthPolling = Math.max(1, Math.floor(Math.min(batchSize, concurrency) / 2));
    let failures = 0;
    while (!this.#stopping) {
      // Backpressure: no new work while more than a full round of outcomes is still being written.
      // One round may be written while the next is polled and handled (the poll overlaps the ack).
      const free = this.#settling > concurrency ? 0 : concurrency - this.#running.size;
      if (free < worthPolling) {
        await this.#pollWaker.wait(this.#pollIntervalMs);
        continue;
      }
      const limit = Math.min(batchSize, free);
      let rows: Request[];
      try {
        rows = await this.#consumer.poll(new Date(), limit);
        failures = 0;
        this.#guard.succeeded('poll');
      } catch (err) {
        failures++;
        this.#guard.failed('poll', err, 'poll failed');
        if (this.#stopping) break;
        await this.#pollWaker.wait(Math.min(this.#pollIntervalMs, 100 * 2 ** Math.min(failures, 6)));
        continue;
      }
      // Rows dispatched while stopping are still handled: they are ours and the stop waits for them.
      for (const r of rows) this.#start(r);
      // Waits are cut short by a stop or by partitions gained, not by freed capacity: nothing is waiting.
      if (rows.length < limit && !this.#stopping) await this.#idleWaker.wait(this.#pollIntervalMs);
    }
  }

  // ---- handling ----

  #start(req: Request): void {
    this.#stats.dispatched++;
    const job: Job = { req, ctrl: new AbortController(), detached: false };
    const k = keyOfReq(req);
    const prev = this.#latest.get(k);
    // Dispatched again while an older dispatch still runs here: the older one's lease is gone
    // (its partition moved away and back), so stop it now rather than at the next rebalance.
    if (prev && prev.req.attempt !== req.attempt && !prev.ctrl.signal.aborted) {
      prev.ctrl.abort(new Error('request dispatched again'));
    }
    this.#latest.set(k, job);
    this.#running.add(job);
    void this.#runJob(job);
  }

  /** `job` no longer runs its handler. */
  #forget(job: Job): void {
    this.#running.delete(job);
    const k = keyOfReq(job.req);
    if (this.#latest.get(k) === job) this.#latest.delete(k);
  }

  async #runJob(job: Job): Promise<void> {
    const { req } = job;
    let outcome: Settlement | undefined;
    try {
      const handle = () => this.#opts.handle(req, job.ctrl.signal);
      // Traced: the span links back to the producer's span when the envelope carries its traceparent.
      const out = this.#tracer
        ? await handleSpan(this.#tracer, req.envelope, { 'q.queue': req.queue, 'q.partition': req.partition }, handle)
        : await handle();
      outcome = settlementOf(out, req);
      if (outcome.kind === 'invalid') {
        this.#log.error({ queue: req.queue, id: req.id, reason: outcome.reason }, 'handler returned no valid outcome');
        outcome = undefined;
      }
    } catch (err) {
      if (!job.ctrl.signal.aborted) this.#log.warn({ ...errorFields(err), queue: req.queue, id: req.id }, 'handler failed');
    }
    if (job.detached) return; // the stop gave up on it: already abandoned
    this.#forget(job);
    this.#settling++;
    this.#wake();
    try {
      const settled = this.#settle(job, outcome);
      // No handler left to join the ack batch: write it now instead of waiting for `ackFlushMs`.
      if (this.#running.size === 0) this.#acks.flush();
      await settled;
    } catch (err) {
      this.#log.error({ ...errorFields(err), queue: req.queue, id: req.id }, 'settling a request failed');
    } finally {
      this.#settling--;
      this.#wake();
    }
  }

  async #settle(job: Job, settlement: Settlement | undefined): Promise<void> {
    const { req } = job;
    const stamp = stampOf(req);
    let outcome = settlement;
    if (outcome?.kind === 'result') {
      const res = await this.#acks.add(outcome.completion);
      if (res !== 'invalid') {
        this.#stats[res]++;
        return;
      }
      // The store refused it although it passed the checks above: fail this request alone.
      outcome = undefined;
    }
    if (!outcome && job.ctrl.signal.aborted) {
      // Aborted (lease lost or stop timeout): put it back now; fenced if no longer ours.
      await this.#write('undispatched', stamp, () => this.#consumer.undispatch([stamp]));
      return;
    }
    if (outcome?.kind === 'defer') {
      const at = outcome.at;
      await this.#write('deferred', stamp, () => this.#consumer.defer([stamp], at));
      return;
    }
    let retryAt: number;
    let envelope = req.envelope;
    if (outcome?.kind === 'retry') {
      retryAt = outcome.at;
      envelope = outcome.envelope;
    } else {
      this.#stats.failed++;
      retryAt = Math.ceil((Date.now() + this.#errorRetryDelayMs) / 1000);
    }
    await this.#write('retried', stamp, async () => {
      if (!(await this.#consumer.retry(stamp, retryAt, envelope))) this.#stats.fenced++;
    });
  }

  /** Writes an outcome with retries; abandons the request if it still fails. */
  async #write(kind: 'retried' | 'deferred' | 'undispatched', stamp: Stamp, fn: () => Promise<void>): Promise<void> {
    try {
      await withRetries(fn, STORE_RETRIES, (err, attempt) =>
        this.#log.warn({ ...errorFields(err), attempt, queue: this.#opts.queue }, `${kind}: store call failed; retrying`),
      );
      this.#stats[kind]++;
    } catch (err) {
      // Defer/undispatch already abandoned it on their error; abandon is idempotent. Only
      // transient errors were retried: anything else would fail the same way again.
      this.#consumer.abandon(stamp);
      this.#stats.abandoned++;
      this.#log.error({ ...errorFields(err), queue: this.#opts.queue, id: stamp.id }, `${kind}: giving up; request abandoned for redelivery`);
    }
  }

  #detach(job: Job): void {
    job.detached = true;
    this.#forget(job);
    this.#consumer.abandon(stampOf(job.req));
    this.#stats.abandoned++;
    this.#wake();
  }

  /** Capacity or progress changed: the poll loop and a waiting stop re-check. */
  #wake(): void {
    this.#pollWaker.wake();
    this.#settleWaker.wake();
  }

  async #waitSettled(deadline: number): Promise<void> {
    while (this.#running.size + this.#settling > 0 && Date.now() < deadline) await this.#settleWaker.wait(Math.min(100, deadline - Date.now()));
  }
}

/** A Unix-seconds time of an outcome: a finite number, rounded up to a whole second. */
function seconds(v: unknown): number | undefined {
  if (typeof v !== 'number' || !Number.isFinite(v)) return undefined;
  const s = Math.ceil(v);
  return Number.isSafeInteger(s) ? s : undefined;
}

/** Why a store check refused a value (its message names the field, never the value). */
function refusal(err: unknown): string {
  if (isQError(err)) return err.message;
  throw err;
}

/** Checks a handler's return value and puts it in the store's terms. */
function settlementOf(v: unknown, req: Request): Settlement {
  const invalid = (reason: string): Settlement => ({ kind: 'invalid', reason });
  if (!v || typeof v !== 'object') return invalid('not an outcome object');
  const o = v as Record<string, unknown>;
  if ('result' in o) {
    const r = o.result as Record<string, unknown> | null;
    if (!r || typeof r !== 'object') return invalid('result must be an object');
    let expiresAt = 0;
    if (r.expiresAt !== undefined && r.expiresAt !== null) {
      const s = seconds(r.expiresAt);
      if (s === undefined || s < 0) return invalid('result.expiresAt must be a non-negative number of Unix seconds');
      expiresAt = s;
    }
    try {
      const completion = checkCompletion(
        { id: req.id, token: req.token, attempt: req.attempt, route: r.route, payload: r.payload, expiresAt },
        'result',
      );
      return { kind: 'result', completion };
    } catch (err) {
      return invalid(refusal(err));
    }
  }
  if ('retryAt' in o) {
    const at = seconds(o.retryAt);
    if (at === undefined) return invalid('retryAt must be a finite number of Unix seconds');
    let envelope = req.envelope;
    if (o.envelope !== undefined) {
      try {
        envelope = checkEnvelope(o.envelope, 'envelope');
      } catch (err) {
        return invalid(refusal(err));
      }
    }
    return { kind: 'retry', at: Math.max(0, at), envelope };
  }
  if ('defer' in o) {
    const at = seconds(o.defer);
    if (at === undefined) return invalid('defer must be a finite number of Unix seconds');
    return { kind: 'defer', at: Math.max(0, at) };
  }
  return invalid('no result, retryAt or defer');
}
