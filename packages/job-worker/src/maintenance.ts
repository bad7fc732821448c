import type { JobListener, JobStore } from '@q/store/jobs';
import { errorFields, type Logger } from './logger.js';

/** What the maintenance asks of the worker. */
export interface MaintenanceHooks {
  /** The worker's listener now (its connection holds the maintenance lock when leader). */
  listener(): JobListener | undefined;
  /** Replaces the listener with a fresh one (which never bids for the lock) and returns the old one. */
  relisten(): JobListener | undefined;
  /** Due jobs were promoted: idle claimers should look. */
  promoted(): void;
}

/**
 * A worker's share of the table maintenance: every interval it bids for the maintenance lock
 * (held by its listener connection, so a dead holder frees it at once) and, as the holder, reaps
 * lapsed leases and promotes due jobs. Without a listener connection it falls back to a
 * transaction-scoped lock. A stopping worker hands the lock over at once instead of keeping it
 * while it drains (nobody else could maintain meanwhile).
 */
export class Maintenance {
  readonly #store: JobStore;
  readonly #maxResumes: number;
  readonly #intervalMs: number;
  readonly #logger: Logger;
  readonly #hooks: MaintenanceHooks;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(store: JobStore, maxResumes: number, intervalMs: number, logger: Logger, hooks: MaintenanceHooks) {
    this.#store = store;
    this.#maxResumes = maxResumes;
    this.#intervalMs = intervalMs;
    this.#logger = logger;
    this.#hooks = hooks;
  }

  /** Runs a round now, then one every interval until {@link Maintenance.stop}. */
  start(): void {
    this.#round = this.#run();
  }

  /** Stops maintaining; a leader hands over the lock. Resolves once that is done. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearTimeout(this.#timer);
    // A round in flight may still take the lock: hand over after it.
    await this.#round;
    if (!this.#hooks.listener()?.isLeader) return;
    const old = this.#hooks.relisten();
    await old?.close();
    this.#logger.info({}, 'maintenance handed over');
  }

  async #run(): Promise<void> {
    if (this.#stopped) return;
    try {
      const listener = this.#hooks.listener();
      let result: { reaped: Array<{ uuid: string; status: string }>; promoted: number } | null = null;
      if (listener?.connected) {
        if (await listener.tryLeadership()) {
          const reaped = await this.#store.reapExpired(this.#maxResumes);
          const promoted = await this.#store.promoteDue();
          result = { reaped, promoted };
        }
      } else {
        result = await this.#store.maintain(this.#maxResumes);
      }
      for (const r of result?.reaped ?? []) this.#logger.warn({ job_uuid: r.uuid, new_status: r.status }, 'expired lease reaped');
      if (result && result.promoted > 0) this.#hooks.promoted();
    } catch (err) {
      if (!this.#stopped) this.#logger.warn(errorFields(err), 'job maintenance failed');
    }
    if (!this.#stopped) {
      this.#timer = setTimeout(() => {
        this.#round = this.#run();
      }, this.#intervalMs);
    }
  }
}
