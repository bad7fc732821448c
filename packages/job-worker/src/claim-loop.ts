import type { JobStore, LeasedJob } from '@q/store/jobs';
import type { Completer } from './completer.js';
import type { FailureWatch } from './failure-watch.js';
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
  pollMs: number;
  /** Classifies claim failures: transient ones are retried with backoff, persistent ones stop the loop. */
  watch: FailureWatch;
}

/**
 * A worker's claim loop: one round trip at a time claims jobs for the free slots (and the local
 * queue), carrying the outcomes that finished meanwhile; idle, it waits for a wake-up
 * ({@link ClaimLoop.wake}: a notification, a promotion), a freed slot ({@link ClaimLoop.poke}) or
 * its poll interval.
 */
export class ClaimLoop {
  readonly #c: ClaimLoopConfig;
  readonly #host: ClaimLoopHost;
  #workSignal = false;
  #waiter: (() => void) | undefined;
  /** The loop waits for work (or after an error): it will not take outcomes soon. */
  #waitingForWork = false;
  #done = false;

  constructor(config: ClaimLoopConfig, host: ClaimLoopHost) {
    this.#c = config;
    this.#host = host;
  }

  /** The loop will take waiting outcomes into its next round trip (the completer defers to it). */
  get takingOutcomes(): boolean {
    return !this.#waitingForWork && !this.#done;
  }

  /** The loop has ended. */
  get done(): boolean {
    return this.#done;
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
    let soloClaim = false;
    let retryShort = false;
    while (!this.#host.stopping()) {
      const prefetch = c.prefetch.size;
      if (prefetch > 0) {
        if (!this.#roundDue(prefetch)) {
          const waitStarted = performance.now();
          await this.#idle(() => this.#roundDue(prefetch), PREFETCH_FLUSH_MS);
          if (this.#host.stopping()) break;
          // Outcomes waited long enough: write them (and refill what room there is).
          const flush = performance.now() - waitStarted >= PREFETCH_FLUSH_MS && c.completer.pending > 0;
          if (!this.#roundDue(prefetch) && !flush) continue;
        }
      } else if (c.concurrency - this.#host.busy() <= 0) {
        await this.#idle(() => this.#host.busy() < c.concurrency);
        continue;
      }
      // Let every handler that settles in this turn free its slot and hand in its outcome, so one
      // round trip carries them all and claims all their replacements.
      await nextTurn();
      if (this.#host.stopping()) break;
      const limit = Math.min(this.#room(prefetch), c.batch ?? c.concurrency + prefetch);
      if (limit <= 0 && (prefetch === 0 || c.completer.pending === 0)) continue;
      this.#workSignal = false;
      const taken = soloClaim ? [] : c.completer.take();
      soloClaim = false;
      let jobs: LeasedJob[];
      // The leases start no earlier than the statement is sent (the database times them).
      const sentAt = performance.now();
      try {
        // Claimed straight into `running`: handlers start at once, so a separate mark-running
        // write would only add a commit. The finished attempts' outcomes ride along: the steady
        // state costs one statement (one commit) per batch, not a claim plus a completion.
        const claim = { queues: c.queues, workerId: c.workerId, limit, leaseMs: c.leaseMs, start: true };
        if (taken.length > 0 && limit <= 0) {
          const written = await c.store.complete(taken.map((p) => p.outcome));
          c.completer.settle(taken, written);
          jobs = [];
        } else if (taken.length > 0) {
          const r = await c.store.completeAndClaim(
            taken.map((p) => p.outcome),
            claim,
          );
          c.completer.settle(taken, r.written);
          jobs = r.jobs;
        } else {
          jobs = await c.store.claim(claim);
        }
        c.prefetch.roundTrip(performance.now() - sentAt);
      } catch (err) {
        if (taken.length > 0) {
          // The outcomes are written on their own (one by one if need be); claim alone next.
          c.completer.restore(taken);
          soloClaim = true;
          if (!this.#host.stopping()) c.logger.warn(errorFields(err), 'complete-and-claim failed, writing outcomes alone');
          continue;
        }
        if (this.#host.stopping()) break;
        const retryMs = c.watch.failed('claim', err);
        if (retryMs === null) break;
        await this.#idleNotTaking(() => false, retryMs);
        continue;
      }
      c.watch.succeeded('claim');
      if (jobs.length > 0) await this.#host.start(jobs, sentAt);
      // A short batch means the queues are drained: wait for a notification or the poll. After a
      // round that also wrote outcomes, look once more first: a lock key an outcome released was
      // still held in that round's snapshot.
      if (limit > 0 && jobs.length < limit) {
        if (taken.length > 0 && !retryShort) retryShort = true;
        else {
          retryShort = false;
          await this.#idleNotTaking(() => this.#workSignal, c.pollMs);
        }
      } else retryShort = false;
    }
    this.#done = true;
    c.completer.kick();
  }

  /**
   * {@link ClaimLoop.#idle} while the loop waits for work or after an error: outcomes submitted
   * meanwhile are written on their own instead of waiting for the next claim.
   */
  async #idleNotTaking(ready: () => boolean, timeoutMs: number): Promise<void> {
    this.#waitingForWork = true;
    this.#c.completer.kick();
    try {
      await this.#idle(ready, timeoutMs);
    } finally {
      this.#waitingForWork = false;
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

  /** Slots free plus local-queue room: how many jobs the next claim may take. */
  #room(prefetch: number): number {
    return this.#c.concurrency - this.#host.busy() + prefetch - this.#host.buffered();
  }

  /**
   * With prefetch: a round trip is worth its commit once half the local queue (or, for a small
   * one, at least one job) has room, or as many outcomes wait — or at once when a slot idles
   * with nothing prefetched.
   */
  #roundDue(prefetch: number): boolean {
    const half = Math.max(1, Math.ceil(prefetch / 2));
    if (this.#host.busy() < this.#c.concurrency && this.#host.buffered() === 0) return true;
    return this.#room(prefetch) >= half || this.#c.completer.pending >= half;
  }
}

/** Resolves after the current turn of the event loop (pending promise reactions and I/O callbacks). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
