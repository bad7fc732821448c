// The Consumer is the facade: it validates, serialises `poll`/`rebalance`/`close` and keeps the
// public surface; the bookkeeping lives in consumer/ledger.ts and the rebalance algorithm in
// consumer/rebalance.ts.
import type { MeterProvider, TracerProvider } from '@opentelemetry/api';
import { METRIC, observeGauge, qTracer, withOperation, type Tracer } from '@q/otel';
import { QError, QErrorCode, isQError } from '@q/schema';
import type { Completion, Request, Stamp, RequestStore } from '@q/store';
import { Ledger } from './consumer/ledger.js';
import { Rebalancer } from './consumer/rebalance.js';
import { joinErrors } from './errors.js';
import { silentLogger, type Logger } from './logger.js';
import { Serial } from './serial.js';
import { requireArray, requireDate, requireInt, requireMs, requireName, requireOptionalObject, requireStamp } from './validate.js';

/** Options of a {@link Consumer}. */
export interface ConsumerOptions {
  /** Lease and membership lifetime in ms. Rebalance at least every `leaseTtlMs / 3`. */
  leaseTtlMs: number;
  /** How long (ms) a draining partition waits for its in-flight work before it is released anyway. */
  drainTimeoutMs: number;
  /** Structured logger (pino-compatible). Default: silent. */
  logger?: Logger;
  /** Operation spans `q.partition-consumer.<op>`. Absent: no spans, no cost. */
  tracerProvider?: TracerProvider;
  /** Records the `q.partitions.owned` gauge. Absent: the global meter provider. */
  meterProvider?: MeterProvider;
}

/** A read-only snapshot of a {@link Consumer}, for tests, metrics and dashboards. */
export interface ConsumerState {
  /** Partitions held and dispatching, ascending. */
  active: number[];
  /** Partitions held and draining (no new dispatches), ascending. */
  draining: number[];
  /** Rebalances that reached the heartbeat. */
  beats: number;
  /** Dispatched stamps whose outcome has not been written or abandoned yet. */
  tracked: Stamp[];
  /** Every held partition, ascending, with the work dispatched under its current epoch. */
  leases: Array<{ partition: number; epoch: number; draining: boolean; inFlight: number }>;
}

/**
 * One dispatcher's view of one queue: which of the queue's 64 partitions it leases, what it has
 * dispatched and not yet settled, and the rebalance that shares partitions evenly between live
 * dispatchers.
 *
 * Per partition: owned —(above share)→ draining —(nothing in flight, or drain timeout)→
 * released; draining —(below share)→ owned. Share = `ceil(64 / members)`, 0 once stopped.
 *
 * `poll`, `rebalance` and `close` never interleave; `ack`, `retry`, `defer`, `undispatch` and
 * `abandon` may run at any time alongside them.
 */
export class Consumer {
  /** The queue this consumer serves. */
  readonly queue: string;
  /** This dispatcher's unique name (lease owner). */
  readonly owner: string;

  readonly #store: RequestStore;
  readonly #log: Logger;
  readonly #tracer: Tracer | undefined;
  readonly #cycle = new Serial();
  readonly #meterProvider: MeterProvider | undefined;
  #unobserve: (() => void) | undefined;

  #stopping = false;
  #closed = false;
  readonly #ledger = new Ledger();
  readonly #rebalancer: Rebalancer;

  constructor(store: RequestStore, queue: string, owner: string, opts: ConsumerOptions) {
    if (!store || typeof store !== 'object') throw new QError(QErrorCode.INVALID_ARGUMENT, 'new Consumer: store must be a RequestStore');
    requireName('new Consumer', queue, 'queue');
    requireName('new Consumer', owner, 'owner');
    if (!opts || typeof opts !== 'object') throw new QError(QErrorCode.INVALID_ARGUMENT, 'new Consumer: options must be an object');
    // Timer-sized: a runner rebalances every leaseTtlMs / 3, and Node fires an over-long timer at once.
    requireMs('new Consumer', opts.leaseTtlMs, 'leaseTtlMs', 1);
    requireMs('new Consumer', opts.drainTimeoutMs, 'drainTimeoutMs', 0);
    requireOptionalObject('new Consumer', opts.logger, 'logger', 'debug', 'info', 'warn', 'error');
    requireOptionalObject('new Consumer', opts.tracerProvider, 'tracerProvider', 'getTracer');
    requireOptionalObject('new Consumer', opts.meterProvider, 'meterProvider', 'getMeter');
    this.#store = store;
    this.queue = queue;
    this.owner = owner;
    this.#log = opts.logger ?? silentLogger;
    this.#tracer = qTracer(opts.tracerProvider);
    this.#meterProvider = opts.meterProvider;
    this.#rebalancer = new Rebalancer({
      store,
      queue,
      owner,
      ttlMs: opts.leaseTtlMs,
      drainTimeoutMs: opts.drainTimeoutMs,
      log: this.#log,
      ledger: this.#ledger,
      isStopping: () => this.#stopping,
      onSeeded: () => this.#observe(),
    });
  }

  /** True once {@link Consumer.stop} (or close) was called. */
  get stopped(): boolean {
    return this.#stopping;
  }

  /**
   * Dispatches up to `limit` pending requests of the partitions this consumer holds and is not
   * draining (`now` is compared with `notBefore`), and tracks them as in flight. A request
   * dispatched again (after a retry) is returned again and counted once.
   *
   * When the outcome of the dispatch is unknown — the statement failed (e.g. a dropped
   * connection) or `signal` aborted while it ran — the consumer is marked for reconciliation:
   * the next rebalance returns whatever was dispatched but is not tracked to pending. An aborted
   * poll rejects with `signal.reason` at once; the statement keeps the consumer's cycle until it
   * finishes, so the next rebalance sees its effect.
   */
  async poll(now: Date, limit: number, signal?: AbortSignal): Promise<Request[]> {
    requireDate('Consumer.poll', now, 'now');
    requireInt('Consumer.poll', limit, 'limit', 0);
    if (signal?.aborted) throw signal.reason;
    return this.#cycle.run((hold) =>
      withOperation(
        this.#tracer,
        'q.partition-consumer.poll',
        async () => {
          this.#assertOpen();
          if (limit === 0) return [];
          // Aborted while waiting for the cycle: nothing was sent, so nothing is unknown.
          if (signal?.aborted) throw signal.reason;
          const dispatching = this.#store.dispatch(this.queue, this.owner, now, limit);
          let rows: Request[];
          try {
            rows = signal ? await raceAbort(dispatching, signal) : await dispatching;
          } catch (err) {
            this.#ledger.reconcile = true;
            hold(dispatching.catch(() => undefined));
            this.#log.warn({ queue: this.queue, aborted: signal?.aborted ?? false }, 'dispatch outcome unknown; reconciling on next rebalance');
            throw err;
          }
          for (const r of rows) this.#ledger.track(r);
          return rows;
        },
        { 'q.queue': this.queue },
      ),
    );
  }

  /**
   * Writes results (one transaction) and stops tracking every given stamp, acked or fenced.
   * Returns one boolean per completion: `false` = fenced (no longer this consumer's work).
   * On error nothing is forgotten: the caller decides (normally {@link Consumer.abandon}).
   */
  async ack(completions: Completion[]): Promise<boolean[]> {
    requireArray('Consumer.ack', completions, 'completions');
    const res = await this.#store.ack(this.owner, completions);
    for (const c of completions) this.#ledger.done(c);
    return res;
  }

  /**
   * Returns a dispatched request to pending with a new envelope, not dispatched again before
   * `notBefore` (Unix s). `false` = fenced. On error nothing is forgotten.
   */
  async retry(stamp: Stamp, notBefore: number, envelope: string): Promise<boolean> {
    requireStamp('Consumer.retry', stamp, 'stamp');
    const ok = await this.#store.retry(this.owner, stamp, notBefore, envelope);
    this.#ledger.done(stamp);
    return ok;
  }

  /**
   * Returns dispatched requests to pending, not dispatched again before `notBefore` (Unix s).
   * Fenced stamps are skipped silently. On error the stamps are abandoned, then the error is thrown
   * (`INVALID_ARGUMENT` writes and abandons nothing).
   */
  async defer(stamps: Stamp[], notBefore: number): Promise<void> {
    requireArray('Consumer.defer', stamps, 'stamps');
    try {
      await this.#store.defer(this.owner, stamps, notBefore);
    } catch (err) {
      // Bad input wrote nothing and changes nothing; any other failure leaves the outcome unknown.
      if (!isQError(err, QErrorCode.INVALID_ARGUMENT)) this.abandon(...stamps);
      throw err;
    }
    for (const s of stamps) this.#ledger.done(s);
  }

  /**
   * Returns dispatched requests to pending at once, keeping their deadline order. Fenced stamps
   * are skipped silently. On error the stamps are abandoned, then the error is thrown
   * (`INVALID_ARGUMENT` writes and abandons nothing).
   */
  async undispatch(stamps: Stamp[]): Promise<void> {
    requireArray('Consumer.undispatch', stamps, 'stamps');
    try {
      await this.#store.undispatch(this.owner, stamps);
    } catch (err) {
      if (!isQError(err, QErrorCode.INVALID_ARGUMENT)) this.abandon(...stamps);
      throw err;
    }
    for (const s of stamps) this.#ledger.done(s);
  }

  /**
   * Gives up on requests whose outcome could not be written: they stop counting as in flight and
   * the next rebalance (or close) returns them to pending. Stamps of an older attempt than the
   * tracked one, or untracked stamps, are ignored. Anything not shaped like a stamp is
   * `INVALID_ARGUMENT`, and then none of the given stamps is abandoned.
   */
  abandon(...stamps: Stamp[]): void {
    stamps.forEach((s, i) => requireStamp('Consumer.abandon', s, `stamps[${i}]`));
    for (const s of stamps) this.#ledger.abandon(s);
  }

  /**
   * Withdraws from the queue (irreversible): the next rebalance heartbeats as a non-member (the
   * peers' share grows at once) with a share of 0, so every partition drains — idle ones are
   * released at once, busy ones when their work is settled or at the drain timeout. Acks still work.
   */
  stop(): void {
    if (!this.#stopping) this.#log.info({ queue: this.queue, owner: this.owner }, 'consumer stopping');
    this.#stopping = true;
  }

  /**
   * Hands over at once: undispatches abandoned work, releases every partition and drops
   * membership, regardless of work in flight (the next owner redelivers it). Later polls and
   * rebalances throw `CLOSED`; calling close again retries the hand-over.
   */
  close(): Promise<void> {
    return this.#cycle.run(() =>
      withOperation(
        this.#tracer,
        'q.partition-consumer.close',
        async () => {
          this.#closed = true;
          this.#stopping = true;
          this.#unobserve?.();
          this.#unobserve = undefined;
          const errors: unknown[] = [];
          try {
            await this.#rebalancer.undispatchOrphans();
          } catch (err) {
            errors.push(err);
          }
          try {
            await this.#store.leave(this.queue, this.owner);
          } catch (err) {
            errors.push(err);
          }
          this.#ledger.leases.clear();
          this.#log.info({ queue: this.queue, owner: this.owner, failed: errors.length }, 'consumer closed');
          const err = joinErrors(errors, 'close');
          if (err) throw err;
        },
        { 'q.queue': this.queue },
      ),
    );
  }

  /**
   * One heartbeat: keeps membership and leases alive and moves this consumer towards its share
   * of the partitions (see the class description). Pass the database clock (`store.now()`) so
   * every dispatcher times leases alike. Errors of the orphan/reconcile steps do not stop the
   * rebalance; they are thrown (joined) at the end.
   */
  async rebalance(now: Date): Promise<void> {
    requireDate('Consumer.rebalance', now, 'now');
    return this.#cycle.run(() =>
      withOperation(this.#tracer, 'q.partition-consumer.rebalance', () => this.#rebalanceLocked(now), {
        'q.queue': this.queue,
      }),
    );
  }

  /** A read-only snapshot of the consumer's bookkeeping. */
  inspect(): ConsumerState {
    const leases = this.#ledger.leaseList();
    return {
      active: leases.filter((l) => !l.draining).map((l) => l.partition),
      draining: leases.filter((l) => l.draining).map((l) => l.partition),
      beats: this.#rebalancer.beats,
      tracked: this.#ledger.tracked(),
      leases,
    };
  }

  async #rebalanceLocked(now: Date): Promise<void> {
    this.#assertOpen();
    await this.#rebalancer.run(now);
  }

  /** Registers the partitions-owned gauge (from the first rebalance until close). */
  #observe(): void {
    this.#unobserve ??= observeGauge(
      this.#meterProvider,
      METRIC.partitionsOwned,
      { unit: '{partition}', description: 'Partitions leased by this dispatcher, by state (active | draining)' },
      () => {
        let draining = 0;
        const leases = this.#ledger.leases;
        for (const st of leases.values()) if (st.draining) draining++;
        return [
          { value: leases.size - draining, attributes: { queue: this.queue, state: 'active' } },
          { value: draining, attributes: { queue: this.queue, state: 'draining' } },
        ];
      },
    );
  }

  #assertOpen(): void {
    if (this.#closed) throw new QError(QErrorCode.CLOSED, `consumer of queue "${this.queue}" is closed`);
  }
}

/** Resolves/rejects like `p`, or rejects with `signal.reason` as soon as `signal` aborts. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
