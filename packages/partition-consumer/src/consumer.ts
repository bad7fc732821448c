import type { MeterProvider, TracerProvider } from '@opentelemetry/api';
import { METRIC, observeGauge, qTracer, withOperation, type Tracer } from '@q/otel';
import { QError, QErrorCode, isQError } from '@q/schema';
import { PARTITIONS, type Completion, type Lease, type Request, type Stamp, type Store } from '@q/store';
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

interface PartitionState {
  epoch: number;
  acquiredAtMs: number;
  draining: boolean;
  drainSinceMs: number;
  inFlight: number;
}

interface Tracked extends Stamp {
  partition: number;
  epoch: number;
}

// Postgres text cannot hold NUL, so it cannot occur inside an id or a token.
const keyString = (k: { id: string; token: string }): string => `${k.id}\u0000${k.token}`;
const ascending = (a: number, b: number): number => a - b;

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

  readonly #store: Store;
  readonly #ttlMs: number;
  readonly #drainTimeoutMs: number;
  readonly #log: Logger;
  readonly #tracer: Tracer | undefined;
  readonly #cycle = new Serial();
  readonly #meterProvider: MeterProvider | undefined;
  #unobserve: (() => void) | undefined;

  #seeded = false;
  #stopping = false;
  #closed = false;
  #reconcile = false;
  #beats = 0;
  #leases = new Map<number, PartitionState>();
  readonly #inflight = new Map<string, Tracked>();
  readonly #orphans = new Map<string, Stamp>();

  constructor(store: Store, queue: string, owner: string, opts: ConsumerOptions) {
    if (!store || typeof store !== 'object') throw new QError(QErrorCode.INVALID_ARGUMENT, 'new Consumer: store is required');
    requireName('new Consumer', queue, 'queue');
    requireName('new Consumer', owner, 'owner');
    if (!opts || typeof opts !== 'object') throw new QError(QErrorCode.INVALID_ARGUMENT, 'new Consumer: options are required');
    // Timer-sized: a runner rebalances every leaseTtlMs / 3, and Node fires an over-long timer at once.
    requireMs('new Consumer', opts.leaseTtlMs, 'leaseTtlMs', 1);
    requireMs('new Consumer', opts.drainTimeoutMs, 'drainTimeoutMs', 0);
    requireOptionalObject('new Consumer', opts.logger, 'logger', 'debug', 'info', 'warn', 'error');
    requireOptionalObject('new Consumer', opts.tracerProvider, 'tracerProvider', 'getTracer');
    requireOptionalObject('new Consumer', opts.meterProvider, 'meterProvider', 'getMeter');
    this.#store = store;
    this.queue = queue;
    this.owner = owner;
    this.#ttlMs = opts.leaseTtlMs;
    this.#drainTimeoutMs = opts.drainTimeoutMs;
    this.#log = opts.logger ?? silentLogger;
    this.#tracer = qTracer(opts.tracerProvider);
    this.#meterProvider = opts.meterProvider;
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
            this.#reconcile = true;
            hold(dispatching.catch(() => undefined));
            this.#log.warn({ queue: this.queue, aborted: signal?.aborted ?? false }, 'dispatch outcome unknown; reconciling on next rebalance');
            throw err;
          }
          for (const r of rows) this.#track(r);
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
    for (const c of completions) this.#done(c);
    return res;
  }

  /**
   * Returns a dispatched request to pending with a new envelope, not dispatched again before
   * `notBefore` (Unix s). `false` = fenced. On error nothing is forgotten.
   */
  async retry(stamp: Stamp, notBefore: number, envelope: string): Promise<boolean> {
    const ok = await this.#store.retry(this.owner, stamp, notBefore, envelope);
    this.#done(stamp);
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
    for (const s of stamps) this.#done(s);
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
    for (const s of stamps) this.#done(s);
  }

  /**
   * Gives up on requests whose outcome could not be written: they stop counting as in flight and
   * the next rebalance (or close) returns them to pending. Stamps of an older attempt than the
   * tracked one, or untracked stamps, are ignored. Anything not shaped like a stamp is
   * `INVALID_ARGUMENT`, and then none of the given stamps is abandoned.
   */
  abandon(...stamps: Stamp[]): void {
    stamps.forEach((s, i) => requireStamp('Consumer.abandon', s, `stamps[${i}]`));
    for (const s of stamps) {
      const k = keyString(s);
      const t = this.#inflight.get(k);
      if (!t || t.attempt !== s.attempt) continue;
      this.#orphans.set(k, { id: t.id, token: t.token, attempt: t.attempt });
      this.#untrack(k, t);
    }
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
            await this.#undispatchOrphans();
          } catch (err) {
            errors.push(err);
          }
          try {
            await this.#store.leave(this.queue, this.owner);
          } catch (err) {
            errors.push(err);
          }
          this.#leases.clear();
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
    const parts = [...this.#leases.keys()].sort(ascending);
    const leases = parts.map((partition) => {
      const st = this.#leases.get(partition) as PartitionState;
      return { partition, epoch: st.epoch, draining: st.draining, inFlight: st.inFlight };
    });
    return {
      active: leases.filter((l) => !l.draining).map((l) => l.partition),
      draining: leases.filter((l) => l.draining).map((l) => l.partition),
      beats: this.#beats,
      tracked: [...this.#inflight.values()].map((t) => ({ id: t.id, token: t.token, attempt: t.attempt })),
      leases,
    };
  }

  // ---- rebalance steps (docs/design/requests.md#rebalance-algorithm) ----

  async #rebalanceLocked(now: Date): Promise<void> {
    this.#assertOpen();
    const nowMs = now.getTime();
    // 1. Partition rows exist (once; retried next time on error).
    if (!this.#seeded) {
      await this.#store.ensurePartitions(this.queue);
      this.#seeded = true;
      this.#observe();
    }
    // 2. Settle what this consumer could not: abandoned work, unknown dispatches.
    const errors: unknown[] = [];
    try {
      await this.#undispatchOrphans();
    } catch (err) {
      errors.push(err);
    }
    try {
      await this.#reconcileInFlight();
    } catch (err) {
      errors.push(err);
    }
    // 3. Heartbeat: membership (withdrawn once stopped) and lease renewal.
    try {
      const beat = await this.#store.heartbeat(this.queue, this.owner, now, this.#ttlMs, !this.#stopping);
      // 4. Mirror what the database says is held.
      this.#syncLeases(beat.leases, nowMs);
      // 5. Redeliver rows left in flight under older epochs.
      this.#beats++;
      if (this.#beats % 10 !== 0) {
        const recent = [...this.#leases].filter(([, st]) => nowMs - st.acquiredAtMs < 2 * this.#ttlMs).map(([p]) => p);
        if (recent.length > 0) await this.#store.resetStale(this.queue, this.owner, recent.sort(ascending));
      } else {
        await this.#store.resetStale(this.queue, this.owner);
      }
      // 6. Hand over drained partitions.
      await this.#releaseDrained(nowMs);
      // 7–9. Move towards the share.
      await this.#moveTowardsShare(now, beat.members);
    } catch (err) {
      // Steps 3–9 stop at their first error; earlier step errors are reported with it.
      throw joinErrors([...errors, err], 'rebalance');
    }
    const err = joinErrors(errors, 'rebalance');
    if (err) throw err;
  }

  async #moveTowardsShare(now: Date, members: number): Promise<void> {
    const nowMs = now.getTime();
    const target = this.#stopping ? 0 : Math.ceil(PARTITIONS / Math.max(1, members));
    const active: number[] = [];
    const draining: number[] = [];
    for (const [p, st] of [...this.#leases].sort((a, b) => a[0] - b[0])) (st.draining ? draining : active).push(p);

    if (active.length < target) {
      let need = target - active.length;
      // Undrain before acquiring: keeps work where it is and needs no epoch bump.
      const undrain = draining.slice(0, Math.min(need, draining.length));
      if (undrain.length > 0) {
        await this.#store.setDraining(this.queue, this.owner, undrain, false);
        for (const p of undrain) {
          const st = this.#leases.get(p);
          if (st) {
            st.draining = false;
            st.drainSinceMs = 0;
          }
        }
        need -= undrain.length;
      }
      if (need > 0) {
        const got = await this.#store.acquirePartitions(this.queue, this.owner, now, this.#ttlMs, need);
        for (const l of got) this.#leases.set(l.partition, this.#freshState(l, nowMs));
        if (got.length > 0) {
          this.#log.info({ queue: this.queue, partitions: got.map((l) => l.partition) }, 'partitions acquired');
          // Redeliver what the previous owner left in flight.
          await this.#store.resetStale(this.queue, this.owner, got.map((l) => l.partition).sort(ascending));
        }
      }
    } else if (active.length > target) {
      // Fewest in flight first (they hand over soonest), ties to the highest partition.
      const surplus = active
        .map((p) => ({ p, n: (this.#leases.get(p) as PartitionState).inFlight }))
        .sort((a, b) => a.n - b.n || b.p - a.p)
        .slice(0, active.length - target)
        .map((c) => c.p)
        .sort(ascending);
      await this.#store.setDraining(this.queue, this.owner, surplus, true);
      for (const p of surplus) {
        const st = this.#leases.get(p);
        if (st) {
          st.draining = true;
          st.drainSinceMs = nowMs;
        }
      }
      this.#log.info({ queue: this.queue, partitions: surplus, target }, 'partitions draining');
      await this.#releaseDrained(nowMs);
    }
  }

  /** Registers the partitions-owned gauge (from the first rebalance until close). */
  #observe(): void {
    this.#unobserve ??= observeGauge(
      this.#meterProvider,
      METRIC.partitionsOwned,
      { unit: '{partition}', description: 'Partitions leased by this dispatcher, by state (active | draining)' },
      () => {
        let draining = 0;
        for (const st of this.#leases.values()) if (st.draining) draining++;
        return [
          { value: this.#leases.size - draining, attributes: { queue: this.queue, state: 'active' } },
          { value: draining, attributes: { queue: this.queue, state: 'draining' } },
        ];
      },
    );
  }

  #syncLeases(held: Lease[], nowMs: number): void {
    const next = new Map<number, PartitionState>();
    for (const l of held) {
      const cur = this.#leases.get(l.partition);
      const st = cur && cur.epoch === l.epoch ? cur : this.#freshState(l, nowMs);
      if (l.draining && !st.draining) st.drainSinceMs = nowMs;
      st.draining = l.draining;
      next.set(l.partition, st);
    }
    for (const p of this.#leases.keys()) {
      if (!next.has(p)) this.#log.warn({ queue: this.queue, partition: p }, 'partition lost');
    }
    this.#leases = next;
  }

  /**
   * State of a lease seen for the first time at this epoch. Its in-flight count is normally 0;
   * it is recounted from the tracked stamps in case a dispatch ran before the lease was known
   * locally (an acquire whose reply was lost).
   */
  #freshState(l: Lease, nowMs: number): PartitionState {
    let inFlight = 0;
    for (const t of this.#inflight.values()) if (t.partition === l.partition && t.epoch === l.epoch) inFlight++;
    return { epoch: l.epoch, acquiredAtMs: nowMs, draining: l.draining, drainSinceMs: l.draining ? nowMs : 0, inFlight };
  }

  async #releaseDrained(nowMs: number): Promise<void> {
    const done = [...this.#leases]
      .filter(([, st]) => st.draining && (st.inFlight === 0 || nowMs - st.drainSinceMs >= this.#drainTimeoutMs))
      .map(([p]) => p)
      .sort(ascending);
    if (done.length === 0) return;
    await this.#store.releasePartitions(this.queue, this.owner, done);
    for (const p of done) this.#leases.delete(p);
    this.#log.info({ queue: this.queue, partitions: done }, 'partitions released');
  }

  async #undispatchOrphans(): Promise<void> {
    if (this.#orphans.size === 0) return;
    const stamps = [...this.#orphans.values()];
    await this.#store.undispatch(this.owner, stamps);
    for (const s of stamps) {
      const k = keyString(s);
      // A newer abandon of the same request (after a re-dispatch) stays for the next round.
      if (this.#orphans.get(k)?.attempt === s.attempt) this.#orphans.delete(k);
    }
  }

  async #reconcileInFlight(): Promise<void> {
    if (!this.#reconcile) return;
    const stamps = await this.#store.inFlight(this.queue, this.owner);
    const unknown = stamps.filter((s) => this.#inflight.get(keyString(s))?.attempt !== s.attempt);
    if (unknown.length > 0) {
      await this.#store.undispatch(this.owner, unknown);
      this.#log.info({ queue: this.queue, count: unknown.length }, 'untracked dispatches returned to pending');
    }
    this.#reconcile = false;
  }

  // ---- bookkeeping primitives (docs/design/requests.md#consumer-bookkeeping) ----

  #track(r: Request): void {
    const k = keyString(r);
    const prev = this.#inflight.get(k);
    if (prev) this.#untrack(k, prev);
    this.#orphans.delete(k);
    this.#inflight.set(k, { id: r.id, token: r.token, attempt: r.attempt, partition: r.partition, epoch: r.epoch });
    const st = this.#leases.get(r.partition);
    if (st && st.epoch === r.epoch) st.inFlight++;
  }

  #untrack(k: string, t: Tracked): void {
    this.#inflight.delete(k);
    const st = this.#leases.get(t.partition);
    // A stale outcome never uncounts work dispatched under a newer epoch.
    if (st && st.epoch === t.epoch && st.inFlight > 0) st.inFlight--;
  }

  /** Forgets `s` only if it is the tracked attempt: an older attempt's outcome never forgets a newer one. */
  #done(s: Stamp): void {
    const k = keyString(s);
    const t = this.#inflight.get(k);
    if (t && t.attempt === s.attempt) this.#untrack(k, t);
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
