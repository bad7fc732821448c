// The partition worker: the loops (rebalance, poll), the handlers with bounded concurrency, and
// the writing of their outcomes. Options and their checks live in options.ts, the outcome checks
// in outcome.ts; the pieces it drives (AckBatcher, Waker, retries) beside it; its failure watch is
// the job worker's too (`FailureWatch` of @q/schema/internal).
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { qTracer, type Tracer } from '@q/otel';
import { FailureWatch } from '@q/schema/internal';
import { stampOf, type Request, type Stamp } from '@q/store';
import { Consumer } from '../consumer.js';
import { errorFields, silentLogger, type Logger } from '../logger.js';
import { AckBatcher } from './ack-batcher.js';
import { fallbackSettlement, HandlerFailures, SET_ASIDE_NOT_BEFORE, type Failure } from './failures.js';
import { handleSpan } from './handle-span.js';
import { resolveOptions, type PartitionWorkerFailure, type PartitionWorkerOptions, type PartitionWorkerStats } from './options.js';
import { settlementOf, type Settlement } from './outcome.js';
import { STORE_RETRIES, withRetries } from './retries.js';
import { Waker } from './waker.js';

export type { HandlerFailure, PartitionWorkerOptions, PartitionWorkerStats } from './options.js';
export type { Outcome } from './outcome.js';

/** Fastest rebalance beat, used while partitions are moving. */
const RAPID_BEAT_MS = 100;

/** Longest wait of a stop for outcome writes still in progress (each is bounded by its retries anyway). */
const SHUTDOWN_WRITE_MS = 5_000;

interface Job {
  req: Request;
  ctrl: AbortController;
  detached: boolean;
}

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
  readonly #guard: FailureWatch<PartitionWorkerFailure['operation']>;
  readonly #failures: HandlerFailures;
  /** Stops the worker from inside (a persistent failure), as the caller's signal does. */
  readonly #halt = new AbortController();

  readonly #opts: PartitionWorkerOptions;

  constructor(opts: PartitionWorkerOptions) {
    this.#opts = opts;
    const settings = resolveOptions(opts);
    this.#pollIntervalMs = settings.pollIntervalMs;
    this.#stopTimeoutMs = settings.stopTimeoutMs;
    this.#failures = new HandlerFailures(settings.maxHandlerFailures, settings.errorRetryDelayMs);

    const owner = opts.owner ?? defaultOwner();
    this.#log = opts.logger ?? silentLogger;
    this.#guard = new FailureWatch({
      owner: 'partition worker',
      operations: ['rebalance', 'poll', 'write'],
      maxPersistent: settings.maxPersistentFailures,
      logger: this.#log,
      errorFields,
      fields: { queue: opts.queue },
      onError: opts.onError,
      stop: () => this.#halt.abort(),
    });
    this.#tracer = qTracer(opts.tracerProvider);
    this.#consumer = new Consumer(opts.store, opts.queue, owner, {
      leaseTtlMs: opts.leaseTtlMs,
      drainTimeoutMs: opts.drainTimeoutMs,
      logger: this.#log,
      ...(opts.tracerProvider ? { tracerProvider: opts.tracerProvider } : {}),
      ...(opts.meterProvider ? { meterProvider: opts.meterProvider } : {}),
    });
    // A batch larger than `concurrency` could never fill (a request keeps its slot until written).
    // Writes count for the guard too: results never writable (INSERT revoked) would be handled again for ever.
    this.#acks = new AckBatcher(this.#consumer, Math.min(settings.ackBatchSize, opts.concurrency), settings.ackFlushMs, this.#log, (err) =>
      err === undefined ? this.#guard.succeeded('write') : this.#guard.failed('write', err, 'writing results failed'),
    );
    this.#firstRebalance = new Promise<void>((r) => (this.#resolveFirst = r));
    this.#stats = { owner, dispatched: 0, acked: 0, fenced: 0, retried: 0, deferred: 0, undispatched: 0, abandoned: 0, failed: 0, setAside: 0 };
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

    this.#opts.pollWake?.(() => {
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
    let failure: Failure = { reason: 'handler threw' };
    try {
      const handle = () => this.#opts.handle(req, job.ctrl.signal);
      // Traced: the span links back to the producer's span when the envelope carries its traceparent.
      const out = this.#tracer
        ? await handleSpan(this.#tracer, req.envelope, { 'q.queue': req.queue, 'q.partition': req.partition }, handle)
        : await handle();
      outcome = settlementOf(out, req);
      if (outcome.kind === 'invalid') {
        this.#log.error({ queue: req.queue, id: req.id, reason: outcome.reason }, 'handler returned no valid outcome');
        failure = { reason: `no valid outcome: ${outcome.reason}` };
        outcome = undefined;
      }
    } catch (err) {
      failure = { reason: 'handler threw', error: err };
      if (!job.ctrl.signal.aborted) this.#log.warn({ ...errorFields(err), queue: req.queue, id: req.id }, 'handler failed');
    }
    if (job.detached) return; // the stop gave up on it: already abandoned
    this.#forget(job);
    this.#settling++;
    this.#wake();
    try {
      const settled = this.#settle(job, outcome, failure);
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

  async #settle(job: Job, settlement: Settlement | undefined, failed: Failure): Promise<void> {
    const { req } = job;
    const stamp = stampOf(req);
    let outcome = settlement;
    let failure = failed;
    if (outcome) this.#failures.settled(req);
    if (outcome?.kind === 'result') {
      const res = await this.#acks.add(outcome.completion);
      if (res !== 'invalid') {
        this.#stats[res]++;
        return;
      }
      // The store refused it although it passed the checks above: fail this request alone.
      outcome = undefined;
      failure = { reason: 'the store refused the result' };
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
      const step = this.#failures.failed(req, Date.now());
      if (step.kind === 'give-up') return this.#giveUp(job, failure, step.failures);
      retryAt = step.at;
    }
    await this.#write('retried', stamp, async () => {
      if (!(await this.#consumer.retry(stamp, retryAt, envelope))) this.#stats.fenced++;
    });
  }

  /** Ends the runs of a failing request: its `failureResult` if valid, else set aside (loudly). */
  async #giveUp(job: Job, failure: Failure, failures: number): Promise<void> {
    const { req } = job;
    const fields = { queue: req.queue, id: req.id, failures, reason: failure.reason, deadlinePassed: Date.now() >= req.deadline * 1000 };
    const answer = fallbackSettlement(this.#opts.failureResult, req, { failures, ...failure }, this.#log, fields);
    const res = answer ? await this.#acks.add(answer.completion) : 'invalid';
    if (res !== 'invalid') {
      this.#stats[res]++;
      this.#log.warn(fields, 'handler kept failing; its failureResult was written instead of running it again');
      return;
    }
    this.#log.error(fields, 'handler kept failing; request set aside: it is not dispatched again (it stays pending)');
    const stamp = stampOf(req);
    await this.#write('setAside', stamp, async () => {
      if (!(await this.#consumer.retry(stamp, SET_ASIDE_NOT_BEFORE, req.envelope))) this.#stats.fenced++;
    });
  }

  /** Writes an outcome with retries; abandons the request if it still fails. */
  async #write(kind: 'retried' | 'deferred' | 'undispatched' | 'setAside', stamp: Stamp, fn: () => Promise<void>): Promise<void> {
    try {
      await withRetries(fn, STORE_RETRIES, (err, attempt) =>
        this.#log.warn({ ...errorFields(err), attempt, queue: this.#opts.queue }, `${kind}: store call failed; retrying`),
      );
      this.#stats[kind]++;
      this.#guard.succeeded('write');
    } catch (err) {
      this.#guard.failed('write', err, `${kind}: store call failed`);
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
