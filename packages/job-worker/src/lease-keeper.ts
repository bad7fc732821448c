import type { JobStore } from '@q/store/jobs';
import type { Execution } from './execution.js';
import { errorFields, type Logger } from './logger.js';

/**
 * How long before its end (by this process's clock) an unrenewed lease is given up, and a
 * prefetched job whose lease is that close to its end is not started.
 */
export function leaseGuardMs(leaseMs: number): number {
  return leaseMs / 6;
}

/** What the keeper asks of the worker. */
export interface LeaseKeeperHooks {
  /** The executions whose leases are held (to renew, and to watch). */
  held(): Execution[];
  /** `e`'s lease is known lost: it was fenced, or (`unrenewed`) it is running out unrenewed. */
  lost(e: Execution, unrenewed: boolean): void;
  /** A cancel was requested for `e`'s job. */
  cancelRequested(e: Execution): void;
}

/**
 * Keeps a worker's leases: every sixth of the lease (sooner after a failed renewal) it renews, in
 * one statement, the leases that are a sixth or more through their time, and it gives a lease up
 * as lost when it could not be renewed in time — a sixth of the lease before it would run out by
 * this process's clock, so the handler is told to stop while the database still holds the lease
 * for it and nobody else can have claimed it.
 *
 * Only leases past a sixth are renewed because a renewal is a write to the job's row. Renewing
 * every lease held at each beat rewrote the rows of jobs claimed a moment earlier, which a fast
 * worker completes within milliseconds anyway; those rows are also the ones its completions are
 * writing, so the renewal queued behind their row locks and the completions behind its own — a
 * convoy that stalled a drain for seconds whenever its statements were slow (under a held
 * snapshot). A job that runs on is still looked at every sixth to third of the lease (which is
 * also how a cancel reaches it without notifications), and a lease is renewed with at least two
 * thirds of its time left, so a failed renewal has half the lease for its retries.
 */
export class LeaseKeeper {
  readonly #store: JobStore;
  readonly #leaseMs: number;
  readonly #logger: Logger;
  readonly #hooks: LeaseKeeperHooks;
  #beatTimer: NodeJS.Timeout | undefined;
  #watchTimer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(store: JobStore, leaseMs: number, logger: Logger, hooks: LeaseKeeperHooks) {
    this.#store = store;
    this.#leaseMs = leaseMs;
    this.#logger = logger;
    this.#hooks = hooks;
  }

  get #guardMs(): number {
    return leaseGuardMs(this.#leaseMs);
  }

  /** Leases with this much time left or less are renewed at a beat. */
  get #renewWithinMs(): number {
    return (5 * this.#leaseMs) / 6;
  }

  start(): void {
    this.#scheduleBeat(this.#leaseMs / 6);
    this.#watch();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#beatTimer);
    clearTimeout(this.#watchTimer);
  }

  #scheduleBeat(ms: number): void {
    if (this.#stopped) return;
    this.#beatTimer = setTimeout(() => void this.#beat(), ms);
  }

  async #beat(): Promise<void> {
    const due = performance.now() + this.#renewWithinMs;
    const held = this.#hooks.held().filter((e) => e.leaseUntil <= due);
    let failed = false;
    if (held.length > 0) {
      const sentAt = performance.now();
      try {
        const states = await this.#store.heartbeat(
          held.map((e) => e.lease),
          this.#leaseMs,
        );
        // A job is held under one lease at a time (a re-claimed job's stale lease is given up
        // before the new one is tracked), so the id names the lease renewed.
        const byId = new Map(states.map((s) => [s.id, s]));
        for (const e of held) {
          if (!e.held) continue; // settled or given up while the statement ran
          const state = byId.get(e.job.id);
          if (!state) {
            // Gone from the result: the outcome was written meanwhile, or the lease was lost.
            if (e.state === 'running' || e.state === 'buffered') this.#hooks.lost(e, false);
            continue;
          }
          e.leaseUntil = Math.max(e.leaseUntil, sentAt + this.#leaseMs);
          // A finished attempt's outcome becomes `cancelled` in the database anyway.
          if (state.cancelRequested && (e.state === 'running' || e.state === 'buffered')) this.#hooks.cancelRequested(e);
        }
      } catch (err) {
        failed = true;
        if (!this.#stopped) this.#logger.warn(errorFields(err), 'heartbeat failed');
      }
    }
    // After a failure, try again well before the next lease is due to be given up.
    this.#scheduleBeat(failed ? this.#leaseMs / 12 : this.#leaseMs / 6);
  }

  /** Gives up the leases that ran out unrenewed; checks again twice per guard period. */
  #watch(): void {
    if (this.#stopped) return;
    const now = performance.now();
    for (const e of this.#hooks.held()) {
      if (now >= e.leaseUntil - this.#guardMs) this.#hooks.lost(e, true);
    }
    this.#watchTimer = setTimeout(() => this.#watch(), this.#guardMs / 2);
  }
}
