import type { Tracer } from '@opentelemetry/api';
import { recordSpan, untraced, type JobMetrics } from '@q/otel';
import type { JobStore, LeaderLease } from '@q/store/jobs';
import { errorFields, type Logger } from './logger.js';

/** What the maintenance asks of the worker. */
export interface MaintenanceHooks {
  /** Due jobs were promoted: idle claimers should look. */
  promoted(): void;
  /** A maintenance round failed (the worker's failure watch decides whether that stops it). */
  failed?(err: unknown): void;
  /** A maintenance round succeeded. */
  succeeded?(): void;
}

/** Telemetry of the maintenance: a span per round that did something (or failed), a count of idle ones. */
export interface MaintenanceTelemetry {
  tracer?: Tracer | undefined;
  metrics?: JobMetrics | undefined;
}

const IDLE_MAINTENANCE = Object.freeze({ 'q.operation': 'maintenance' });

/** Lease of the maintenance leadership for a round interval (three missed rounds, at least 1 s). */
export function leaderLeaseMs(intervalMs: number): number {
  return Math.min(Math.max(3 * intervalMs, 1_000), 2_147_483_647);
}

/**
 * A worker's share of the table maintenance: every interval it takes or renews the maintenance
 * leadership — a row of `q_leader_leases` (owner, expiry on the database clock, fencing epoch),
 * not a session lock, so it behaves the same through a transaction pooler, after a failover or on
 * a Citus coordinator — and, as the leader, reaps lapsed leases and promotes due jobs in a round
 * fenced by its epoch: a leader that lost the lease (paused past its expiry, taken over) does no
 * maintenance. A dead leader is replaced once its lease expires ({@link leaderLeaseMs}); a
 * stopping one releases the lease at once instead of keeping it while it drains.
 */
export class Maintenance {
  readonly #store: JobStore;
  readonly #owner: string;
  readonly #maxResumes: number;
  readonly #intervalMs: number;
  readonly #ttlMs: number;
  readonly #logger: Logger;
  readonly #hooks: MaintenanceHooks;
  #lease: LeaderLease | undefined;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> = Promise.resolve();
  #stopped = false;
  #stopping: Promise<void> | undefined;

  readonly #telemetry: MaintenanceTelemetry;

  constructor(
    store: JobStore,
    owner: string,
    maxResumes: number,
    intervalMs: number,
    logger: Logger,
    hooks: MaintenanceHooks,
    telemetry: MaintenanceTelemetry = {},
  ) {
    this.#telemetry = telemetry;
    this.#store = store;
    this.#owner = owner;
    this.#maxResumes = maxResumes;
    this.#intervalMs = intervalMs;
    this.#ttlMs = leaderLeaseMs(intervalMs);
    this.#logger = logger;
    this.#hooks = hooks;
  }

  /** True while this worker holds the maintenance leadership (as of its last round). */
  get isLeader(): boolean {
    return this.#lease !== undefined;
  }

  /** Runs a round now, then one every interval until {@link Maintenance.stop}. */
  start(): void {
    this.#round = this.#run();
  }

  /** Stops maintaining; a leader releases its lease. Resolves (every caller) once that is done. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  /**
   * {@link Maintenance.stop}, waited for at most `ms`: a round blocked on a lock holds the lease
   * row too, and the lease then simply expires.
   */
  async stopWithin(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
    await Promise.race([this.stop(), bound]);
    clearTimeout(timer);
  }

  async #stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    // A round in flight may still take the lease: release after it.
    await this.#round;
    const lease = this.#lease;
    this.#lease = undefined;
    if (!lease) return;
    try {
      await this.#store.releaseLeadership(lease);
      this.#logger.info({ epoch: lease.epoch }, 'maintenance handed over');
    } catch (err) {
      // Not released: the lease simply expires and another worker takes over then.
      this.#logger.warn(errorFields(err), 'maintenance lease not released');
    }
  }

  async #run(): Promise<void> {
    if (this.#stopped) return;
    const { tracer, metrics } = this.#telemetry;
    // Untraced (an idle round is not work): a round that acquired the leadership, reaped or
    // promoted gets one span afterwards, an idle one is only counted.
    const startTime = tracer ? Date.now() : 0;
    let acquired = false;
    let reaped = 0;
    let promoted = 0;
    try {
      if (!this.#lease) {
        this.#lease = (await untraced(() => this.#store.acquireLeadership(this.#owner, this.#ttlMs))) ?? undefined;
        if (this.#lease) {
          acquired = true;
          this.#logger.info({ epoch: this.#lease.epoch }, 'maintenance leadership acquired');
        }
      }
      // A bid sent before stop() may still win: stop() releases that lease, no round runs on it.
      if (this.#lease && !this.#stopped) {
        const lease = this.#lease;
        const result = await untraced(() => this.#store.maintainAsLeader(lease, this.#ttlMs, this.#maxResumes));
        if (!result) {
          this.#logger.warn({ epoch: this.#lease.epoch }, 'maintenance leadership lost');
          this.#lease = undefined;
        } else {
          this.#lease = result.lease;
          reaped = result.reaped.length;
          promoted = result.promoted;
          for (const r of result.reaped) this.#logger.warn({ job_uuid: r.uuid, new_status: r.status }, 'expired lease reaped');
          // A row the round could not write (see JobStore.maintain): needs a human, and is never silent.
          for (const f of result.failed) {
            this.#logger.error(
              { job_id: f.id, job_uuid: f.uuid, step: f.step, dead_lettered: f.deadLettered, err: { message: f.error } },
              'job maintenance could not write a job',
            );
          }
          if (result.promoted > 0) this.#hooks.promoted();
        }
      }
      this.#hooks.succeeded?.();
      if (acquired || reaped > 0 || promoted > 0) {
        if (tracer) recordSpan(tracer, 'q.jobs.worker.maintenance', startTime, { 'q.jobs.reaped': reaped, 'q.jobs.promoted': promoted });
      } else metrics?.idleRounds?.add(1, IDLE_MAINTENANCE);
    } catch (err) {
      if (!this.#stopped) {
        if (tracer) recordSpan(tracer, 'q.jobs.worker.maintenance', startTime, {}, err);
        this.#logger.warn(errorFields(err), 'job maintenance failed');
        this.#hooks.failed?.(err);
      }
    }
    if (!this.#stopped) {
      this.#timer = setTimeout(() => {
        this.#round = this.#run();
      }, this.#intervalMs);
    }
  }
}
