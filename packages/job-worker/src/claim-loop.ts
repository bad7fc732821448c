import { randomUUID } from 'node:crypto';
import type { Tracer } from '@opentelemetry/api';
import { recordSpan, untraced, type JobMetrics } from '@q/otel';
import type { ClaimOptions, JobStore, LeasedJob } from '@q/store/jobs';
import { replyLost, type Completer, type PendingOutcome } from './completer.js';
import type { WorkerFailureWatch } from './failure-watch.js';
import type { LocalQueueSize } from './local-queue-size.js';
import { errorFields, type Logger } from './logger.js';

/** With prefetch, how long a finished attempt's outcome waits for a round trip to ride on. */
export const PREFETCH_FLUSH_MS = 20;

/** What the claim loop needs to know about its worker, and how it hands claimed jobs over. */
export interface ClaimLoopHost {
  /** The worker stops claiming (stopping or stopped). */
  stopping(): boolean;
  /** Slots whose handler runs. */
  busy(): number;
  /** Jobs in the local queue, not yet started. */
  buffered(): number;
  /** Takes claimed jobs (leases sent at `sentAt`, `performance.now()` clock). */
  start(jobs: LeasedJob[], sentAt: number): Promise<void>;
  /**
   * Gives back what the claims `claimIds`, whose replies were lost, leased (their lease tokens
   * derive from their ids). Called with no round trip in flight.
   */
  reconcile(claimIds: string[]): Promise<void>;
}

/** The claim loop's fixed settings. */
export interface ClaimLoopConfig {
  store: JobStore;
  completer: Completer;
  logger: Logger;
  queues: string[];
  workerId: string;
  concurrency: number;
  /** The local queue's size (fixed or adaptive); told each round trip's time. */
  prefetch: LocalQueueSize;
  /** Jobs per claim statement at most; absent: `concurrency` plus the local queue's size. */
  batch: number | undefined;
  leaseMs: number;
  /** The group options every claim passes (limits, fairness, weights; see `ClaimOptions`). */
  groups: Pick<ClaimOptions, 'limits' | 'fair' | 'weights'>;
  pollMs: number;
  /** Classifies claim failures: transient ones are retried with backoff, persistent ones stop the loop. */
  watch: WorkerFailureWatch;
  /** Records a `q.jobs.worker.claim` span per round trip that claimed or wrote something (or failed). */
  tracer?: Tracer | undefined;
  /** Counts round trips that found nothing (`q.jobs.idle_rounds`). */
  metrics?: JobMetrics | undefined;
}

const IDLE_CLAIM = Object.freeze({ 'q.operation': 'claim' });

/**
 * Round trips a worker with a local queue keeps in flight at once. Two: while one statement
 * commits (a WAL flush the worker would otherwise wait out), the next already claims, so the
 * database and the handlers work side by side. Without a local queue it is one, so a worker never
 * holds more leases than slots (a freed slot's outcome and its replacement share a statement).
 */
export const MAX_ROUND_TRIPS = 2;

/**
 * How long after a claim failed without a reply (its statement may still commit: Postgres only
 * notices a lost client when it writes the reply) the loop looks for what it leased.
 */
export const RECONCILE_DELAY_MS = 1_000;

/**
 * What the claim loop is doing (one state, as graphile-worker's local queue names its modes):
 * - `polling`: sending round trips (claims carrying the outcomes that finished meanwhile);
 * - `waiting`: the queues came back drained: waits for a wake-up or the poll interval;
 * - `backing-off`: a round trip failed: waits out the retry delay;
 * - `draining`: the worker stops: no claim is sent, the round trips in flight finish;
 * - `stopped`: the loop has ended.
 * Outcomes ride on the next round trip while `polling` (and `draining`, as the worker decides
 * then); while `waiting` or `backing-off` the completer writes them on their own.
 */
export type ClaimLoopState = 'polling' | 'waiting' | 'backing-off' | 'draining' | 'stopped';

/**
 * What the last round trips ask of the next one (until it is sent, or judged):
 * - `as-usual`: it carries the outcomes waiting and claims;
 * - `claim-alone`: a round trip carrying outcomes failed (they are being written on their own):
 *   the next one claims without outcomes;
 * - `look-again`: a round trip that also wrote outcomes came back short. A lock key or a limit's
 *   slot one of them released was still held in that round's snapshot, so the queues are looked at
 *   once more before the loop idles; a second short round trip then means drained.
 */
type NextTrip = 'as-usual' | 'claim-alone' | 'look-again';

/** Why the loop stopped sending claims until its outstanding round trips are back. */
type Pause = { kind: 'drained' } | { kind: 'limited'; held: number; written: number } | { kind: 'backoff'; ms: number } | { kind: 'stop' };

/**
 * A worker's claim loop: round trips that claim jobs for the free slots (and the local queue),
 * carrying the outcomes that finished meanwhile; idle, it waits for a wake-up
 * ({@link ClaimLoop.wake}: a notification, a promotion), a freed slot ({@link ClaimLoop.poke}) or
 * its poll interval. With a local queue up to {@link MAX_ROUND_TRIPS} are in flight; the jobs they
 * will bring count against the room of the next.
 */
export class ClaimLoop {
  readonly #c: ClaimLoopConfig;
  readonly #host: ClaimLoopHost;
  /** A wake-up came since the last claim was sent: a short reply does not mean nothing waits. */
  #workSignal = false;
  #waiter: (() => void) | undefined;
  #state: ClaimLoopState = 'polling';
  /** Round trips in flight (each removed once it has handed its jobs over and reported). */
  readonly #inFlight = new Set<Promise<void>>();
  /** Jobs the round trips in flight may bring (the sum of their limits). */
  #onOrder = 0;
  /** Set by a round trip that came back short or failed: no claim is sent until it is handled. */
  #pause: Pause | undefined;
  #next: NextTrip = 'as-usual';
  /** Claims whose reply was lost: before claiming again, give back what they may have leased. */
  #lostClaims: string[] = [];
  /** Round trips that wrote outcomes, so far (a limited pause ends when one more has). */
  #written = 0;

  constructor(config: ClaimLoopConfig, host: ClaimLoopHost) {
    this.#c = config;
    this.#host = host;
  }

  /** The loop will take waiting outcomes into its next round trip (the completer defers to it). */
  get takingOutcomes(): boolean {
    return this.#state === 'polling' || this.#state === 'draining';
  }

  /** What the loop is doing. */
  get state(): ClaimLoopState {
    return this.#state;
  }

  /** The loop has ended. */
  get done(): boolean {
    return this.#state === 'stopped';
  }

  /** There may be work: look at once. */
  wake(): void {
    this.#workSignal = true;
    this.#waiter?.();
  }

  /** Something the loop waits on changed (a slot freed, the worker stopping): re-check. */
  poke(): void {
    this.#waiter?.();
  }

  /** Runs until the worker stops. */
  async run(): Promise<void> {
    const c = this.#c;
    while (!this.#host.stopping()) {
      if (this.#pause !== undefined) {
        // What a round trip reported is handled once none is in flight: the waits below are
        // the same as with one round trip at a time.
        if (this.#inFlight.size > 0) {
          await this.#idle(() => this.#inFlight.size === 0);
          continue;
        }
        const pause = this.#pause;
        this.#pause = undefined;
        if (pause.kind === 'stop') break;
        if (pause.kind === 'backoff') await this.#idleNotTaking('backing-off', () => false, pause.ms);
        else if (pause.kind === 'limited') {
          // Also a job of this worker finishing or its outcome written (by a round trip that
          // committed after the short claim was sent): either frees a slot of its group's limit.
          const ready = () => this.#workSignal || this.#held() < pause.held || this.#written > pause.written || c.completer.pending > 0;
          await this.#idleNotTaking('waiting', ready, c.pollMs);
        } else await this.#idleNotTaking('waiting', () => this.#workSignal, c.pollMs);
        if (this.#lostClaims.length > 0 && this.#inFlight.size === 0 && !this.#host.stopping()) {
          await this.#host.reconcile(this.#lostClaims.splice(0));
        }
        continue;
      }
      const prefetch = c.prefetch.size;
      const maxTrips = prefetch > 0 ? MAX_ROUND_TRIPS : 1;
      if (this.#inFlight.size >= maxTrips) {
        await this.#idle(() => this.#inFlight.size < maxTrips || this.#pause !== undefined);
        continue;
      }
      if (prefetch > 0) {
        if (!this.#roundDue(prefetch)) {
          const waitStarted = performance.now();
          await this.#idle(() => this.#roundDue(prefetch) || this.#pause !== undefined, PREFETCH_FLUSH_MS);
          if (this.#host.stopping()) break;
          if (this.#pause !== undefined) continue;
          // Outcomes waited long enough: write them (and refill what room there is).
          const flush = performance.now() - waitStarted >= PREFETCH_FLUSH_MS && c.completer.pending > 0;
          if (!this.#roundDue(prefetch) && !flush) continue;
        }
      } else if (this.#room(0) <= 0) {
        await this.#idle(() => this.#room(0) > 0 || this.#pause !== undefined);
        continue;
      }
      // Let every handler that settles in this turn free its slot and hand in its outcome, so one
      // round trip carries them all and claims all their replacements. A worker woken from idle
      // (nothing running, nothing to write) has nothing to wait for: it claims at once.
      if (this.#host.busy() > 0 || c.completer.pending > 0 || this.#inFlight.size > 0) await nextTurn();
      if (this.#host.stopping()) break;
      if (this.#pause !== undefined || this.#inFlight.size >= maxTrips) continue;
      let limit = Math.max(0, Math.min(this.#room(prefetch), c.batch ?? c.concurrency + prefetch));
      // Short handlers empty the local queue between two round trips, so the room is all free
      // when the loop looks: split it over two round trips sent together (each with half the
      // outcomes), so two statements run and commit side by side instead of one after the other.
      // Only with outcomes to write, i.e. while jobs flow: a poll of idle queues stays one claim
      // (and one connection).
      let takeMax: number | undefined;
      if (maxTrips > 1 && this.#inFlight.size === 0 && c.completer.pending > 1 && limit >= 2 * Math.max(1, Math.ceil(prefetch / 2))) {
        limit = Math.ceil(limit / 2);
        takeMax = Math.ceil(c.completer.pending / 2);
      }
      if (limit <= 0 && (prefetch === 0 || c.completer.pending === 0)) {
        // Nothing to claim and nothing to write: wait for a change instead of spinning.
        await this.#idle(() => this.#room(prefetch) > 0 || c.completer.pending > 0 || this.#pause !== undefined, PREFETCH_FLUSH_MS);
        continue;
      }
      this.#workSignal = false;
      const alone = this.#next === 'claim-alone';
      if (alone) this.#next = 'as-usual';
      const taken = alone ? [] : c.completer.take(takeMax);
      this.#onOrder += limit;
      const trip = this.#roundTrip(limit, taken).finally(() => {
        this.#inFlight.delete(trip);
        this.poke();
      });
      this.#inFlight.add(trip);
    }
    this.#state = 'draining';
    await Promise.all(this.#inFlight);
    this.#state = 'stopped';
    c.completer.kick();
  }

  /** One round trip: writes `taken` outcomes and claims up to `limit` jobs, then hands them over. */
  async #roundTrip(limit: number, taken: PendingOutcome[]): Promise<void> {
    const c = this.#c;
    let jobs: LeasedJob[];
    // The leases start no earlier than the statement is sent (the database times them).
    const sentAt = performance.now();
    const writtenAtSend = this.#written;
    // Names the claim, so that if its reply is lost exactly what it leased can be given back.
    const claimId = randomUUID();
    // The statements run untraced (polling is not work): a round trip that claimed or wrote
    // something gets one span afterwards, an empty one is only counted.
    const startTime = c.tracer ? Date.now() : 0;
    try {
      // Claimed straight into `running`: handlers start at once, so a separate mark-running
      // write would only add a commit. The finished attempts' outcomes ride along: the steady
      // state costs one statement (one commit) per batch, not a claim plus a completion.
      const claim: ClaimOptions = { queues: c.queues, workerId: c.workerId, limit, leaseMs: c.leaseMs, start: true, claimId, ...c.groups };
      if (taken.length > 0 && limit <= 0) {
        const written = await untraced(() => c.store.complete(taken.map((p) => p.outcome)));
        c.completer.succeeded();
        c.completer.settle(taken, written);
        this.#written++;
        jobs = [];
      } else if (taken.length > 0) {
        const r = await untraced(() =>
          c.store.completeAndClaim(
            taken.map((p) => p.outcome),
            claim,
          ),
        );
        c.completer.succeeded();
        c.completer.settle(taken, r.written);
        this.#written++;
        jobs = r.jobs;
      } else {
        jobs = await untraced(() => c.store.claim(claim));
      }
      c.prefetch.roundTrip(performance.now() - sentAt);
    } catch (err) {
      if (c.tracer) recordSpan(c.tracer, 'q.jobs.worker.claim', startTime, { 'q.jobs.limit': limit, 'q.jobs.outcomes': taken.length }, err);
      this.#onOrder -= limit;
      // Without a reply the statement may have committed: the jobs it leased, which this worker
      // never saw, are looked for and given back (see ClaimLoopHost.reconcile) before the next
      // claim, instead of waiting out their leases and counting as a crash.
      const lost = limit > 0 && replyLost(err);
      if (lost) this.#lostClaims.push(claimId);
      if (taken.length > 0) {
        // The outcomes are written on their own (one by one if need be); claim alone next.
        c.completer.restore(taken, lost);
        this.#next = 'claim-alone';
        if (!this.#host.stopping()) c.logger.warn(errorFields(err), 'complete-and-claim failed, writing outcomes alone');
        if (lost) this.#pause ??= { kind: 'backoff', ms: RECONCILE_DELAY_MS };
        return;
      }
      if (this.#host.stopping()) return;
      const retryMs = c.watch.retryAfter('claim', err);
      this.#pause = retryMs === null ? { kind: 'stop' } : { kind: 'backoff', ms: lost ? Math.max(retryMs, RECONCILE_DELAY_MS) : retryMs };
      return;
    }
    c.watch.succeeded('claim');
    if (jobs.length === 0 && taken.length === 0) c.metrics?.idleRounds?.add(1, IDLE_CLAIM);
    else if (c.tracer)
      recordSpan(c.tracer, 'q.jobs.worker.claim', startTime, {
        'q.jobs.limit': limit,
        'q.jobs.claimed': jobs.length,
        'q.jobs.outcomes': taken.length,
      });
    // The jobs stop being on order in the same step as they become the host's (buffered or busy).
    this.#onOrder -= limit;
    if (jobs.length > 0) await this.#host.start(jobs, sentAt);
    // A short batch means the queues are drained: wait for a notification or the poll, unless it
    // also wrote outcomes (see NextTrip: look again first; a claim alone already due is that look).
    // With per-group limits a short batch may be groups at their limit instead: the wait also ends
    // when a job of this worker finishes (its slot frees), not only at the poll.
    if (limit > 0 && jobs.length < limit) {
      if (taken.length > 0 && this.#next !== 'look-again') {
        if (this.#next === 'as-usual') this.#next = 'look-again';
      } else {
        if (this.#next === 'look-again') this.#next = 'as-usual';
        this.#pause ??=
          c.groups.limits !== undefined && c.groups.limits.length > 0
            ? { kind: 'limited', held: this.#held(), written: writtenAtSend }
            : { kind: 'drained' };
      }
    } else {
      if (this.#next === 'look-again') this.#next = 'as-usual';
      // A full batch after a short one (jobs enqueued in between): there is work after all.
      if (limit > 0 && (this.#pause?.kind === 'drained' || this.#pause?.kind === 'limited')) this.#pause = undefined;
    }
  }

  /**
   * {@link ClaimLoop.#idle} in `state` (`waiting` for work, or `backing-off` after an error):
   * outcomes submitted meanwhile are written on their own instead of waiting for the next claim.
   */
  async #idleNotTaking(state: 'waiting' | 'backing-off', ready: () => boolean, timeoutMs: number): Promise<void> {
    this.#state = state;
    this.#c.completer.kick();
    try {
      await this.#idle(ready, timeoutMs);
    } finally {
      this.#state = 'polling';
    }
  }

  /** Waits until `ready()` holds after a wake-up, the timeout passes, or the worker stops. */
  #idle(ready: () => boolean, timeoutMs?: number): Promise<void> {
    if (this.#host.stopping() || ready()) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiter = undefined;
        resolve();
      };
      const timer = timeoutMs === undefined ? undefined : setTimeout(done, timeoutMs);
      this.#waiter = () => {
        if (this.#host.stopping() || ready()) done();
      };
    });
  }

  /** Jobs this worker holds: running or in its local queue. */
  #held(): number {
    return this.#host.busy() + this.#host.buffered();
  }

  /** Slots free plus local-queue room, less what round trips in flight bring: how many jobs the next claim may take. */
  #room(prefetch: number): number {
    return this.#c.concurrency - this.#host.busy() + prefetch - this.#host.buffered() - this.#onOrder;
  }

  /**
   * With prefetch: a round trip is worth its commit once half the local queue (or, for a small
   * one, at least one job) has room, or as many outcomes wait — or at once when a slot idles
   * with nothing prefetched.
   */
  #roundDue(prefetch: number): boolean {
    const half = Math.max(1, Math.ceil(prefetch / 2));
    if (this.#host.busy() < this.#c.concurrency && this.#host.buffered() === 0 && this.#onOrder === 0) return true;
    return this.#room(prefetch) >= half || this.#c.completer.pending >= half;
  }
}

/** Resolves after the current turn of the event loop (pending promise reactions and I/O callbacks). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
