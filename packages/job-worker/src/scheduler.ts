import { MAX_DUE_PER_TICK, type JobStore, type ScheduleFire } from '@q/store/jobs';
import { compileCron, planSlots, type CronSchedule, type SlotPlan } from './cron.js';
import { untraced } from '@q/otel';
import { invalidArgument } from '@q/schema';
import { errorFields, type Logger } from './logger.js';

/**
 * Longest sleep of an idle scheduler that is not woken by notifications (its worker's listener is
 * down, or it runs behind a transaction pooler): how soon a new or changed schedule is seen.
 */
export const SCHEDULER_MAX_IDLE_MS = 1_000;
/**
 * Longest sleep of an idle scheduler while its worker listens: `JobStore.upsertSchedule` notifies
 * (payload `s`), which wakes it at once, so this bound only covers a change written past it (raw
 * SQL) and a notification lost with a connection. Reading every second instead cost each worker
 * 60 statements a minute (`pnpm bench schedule-tick`).
 */
export const SCHEDULER_LISTENING_IDLE_MS = 30_000;
/** Shortest pause between two ticks (a schedule due but fired elsewhere is gone by then). */
const MIN_PAUSE_MS = 20;

/** Options of a {@link Scheduler}. */
export interface SchedulerOptions {
  /**
   * The clock slots are computed against. Default: none, the database's (one clock for every
   * process). Tests drive it explicitly (a DST transition without waiting for one).
   */
  now?: () => Date;
  /**
   * Longest sleep between ticks (ms). Default {@link SCHEDULER_LISTENING_IDLE_MS} while
   * `listening()` says notifications reach this process, else {@link SCHEDULER_MAX_IDLE_MS}.
   */
  maxIdleMs?: number;
  /** Whether schedule notifications reach {@link Scheduler.wake} now. Default: never. */
  listening?: () => boolean;
  logger?: Logger;
  /** A tick failed (the worker's failure watch decides whether that stops it). */
  failed?: (err: unknown) => void;
  /** A tick succeeded. */
  succeeded?: () => void;
}

/** What one {@link Scheduler.tick} did. */
export interface TickResult {
  /** The clock the tick used. */
  now: Date;
  /** Schedules this tick advanced (fired by this process). */
  fired: string[];
  /** Jobs it enqueued. */
  enqueued: number;
  /** The earliest next fire time of all schedules after the tick, or null when there are none. */
  nextAt: Date | null;
  /** Whether more schedules were due than one tick reads (the next tick should follow at once). */
  more: boolean;
}

/**
 * A process's share of firing schedules. There is no leader: every scheduler reads the due
 * schedules (one indexed statement, also when nothing is due) and fires them with a
 * compare-and-set (`JobStore.fireSchedules`), so each slot is enqueued once however many run.
 * Sleeps until the earliest next fire time, at most `maxIdleMs`; {@link Scheduler.wake} (a
 * schedule was created or changed) ends the sleep.
 */
export class Scheduler {
  readonly #store: JobStore;
  readonly #now: (() => Date) | undefined;
  readonly #maxIdleMs: number | undefined;
  readonly #opts: SchedulerOptions;
  /** Compiled patterns by `cron\0timezone`: croner parses a pattern once per process. */
  readonly #compiled = new Map<string, CronSchedule>();
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> = Promise.resolve();
  #stopped = true;
  /** A tick is in flight (between reading and scheduling the next). */
  #ticking = false;
  /** {@link wake} came during a tick: tick again at once after it (it may have read too early). */
  #wakeAgain = false;

  constructor(store: JobStore, opts: SchedulerOptions = {}) {
    this.#store = store;
    this.#now = opts.now;
    this.#maxIdleMs = opts.maxIdleMs;
    this.#opts = opts;
  }

  /** Ends the current sleep: ticks now (or right after the tick in flight). A stopped scheduler ignores it. */
  wake(): void {
    if (this.#stopped) return;
    if (this.#ticking) {
      this.#wakeAgain = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#round = this.#loop();
  }

  /** Ticks now, then whenever the next schedule is due (at least every `maxIdleMs`) until {@link Scheduler.stop}. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#round = this.#loop();
  }

  /** Stops ticking; resolves once a tick in flight has ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#round;
  }

  /** One tick: reads the due schedules and fires them. */
  async tick(): Promise<TickResult> {
    // Reading what is due is polling, not work: untraced, so an idle tick records no span (firing,
    // which enqueues, is traced as usual).
    const read = await untraced(() => this.#store.dueSchedules(this.#now ? this.#now() : null));
    const firings: ScheduleFire[] = [];
    const plans = new Map<string, SlotPlan>();
    for (const d of read.due) {
      let cron: CronSchedule;
      try {
        cron = this.#compile(d.cron, d.timezone);
      } catch (err) {
        // Written past schedule()'s checks (raw SQL, or a time zone this platform lacks): said
        // loudly, and left due so that a fix is picked up.
        this.#opts.logger?.error({ ...errorFields(err), schedule: d.name }, 'schedule has a pattern this process cannot read');
        continue;
      }
      // Schedules sharing a pattern, zone and state (a fleet of `0 * * * *`) share one plan:
      // croner takes ~0.15 ms per step, which 1,000 due schedules would pay 1,000 times.
      const key = `${d.cron}\0${d.timezone}\0${d.nextFireAt.getTime()}\0${d.lastSlot?.getTime() ?? ''}\0${d.backfillMs ?? ''}`;
      let plan = plans.get(key);
      if (!plan) {
        plan = planSlots(cron, d.nextFireAt, d.lastSlot, d.backfillMs, read.now);
        plans.set(key, plan);
      }
      firings.push({
        name: d.name,
        expectedNextFireAt: d.nextFireAt,
        cron: d.cron,
        timezone: d.timezone,
        backfillMs: d.backfillMs,
        nextFireAt: plan.nextFireAt,
        slots: plan.slots,
      });
    }
    const fired = firings.length === 0 ? { fired: [], enqueued: 0 } : await this.#store.fireSchedules(firings);
    // With rows due, the read's minimum was one of them: the earliest is now theirs as advanced
    // (the others are after now; maxIdleMs bounds the sleep anyway).
    let nextAt = read.due.length > 0 ? null : read.nextAt;
    for (const f of firings) if (nextAt === null || f.nextFireAt < nextAt) nextAt = f.nextFireAt;
    return { now: read.now, fired: fired.fired, enqueued: fired.enqueued, nextAt, more: read.due.length >= MAX_DUE_PER_TICK };
  }

  #compile(cron: string, timezone: string): CronSchedule {
    const key = `${cron}\0${timezone}`;
    let c = this.#compiled.get(key);
    if (!c) {
      c = compileCron('scheduler', cron, timezone);
      if (this.#compiled.size >= 10_000) this.#compiled.clear();
      this.#compiled.set(key, c);
    }
    return c;
  }

  async #loop(): Promise<void> {
    if (this.#stopped) return;
    let wait = this.#maxIdleMs ?? (this.#opts.listening?.() === true ? SCHEDULER_LISTENING_IDLE_MS : SCHEDULER_MAX_IDLE_MS);
    this.#ticking = true;
    this.#wakeAgain = false;
    try {
      const t = await this.tick();
      if (t.enqueued > 0) this.#opts.logger?.debug({ fired: t.fired.length, enqueued: t.enqueued }, 'schedules fired');
      if (t.more) wait = 0;
      else if (t.nextAt !== null) wait = Math.min(wait, t.nextAt.getTime() - t.now.getTime());
      this.#opts.succeeded?.();
    } catch (err) {
      if (!this.#stopped) {
        this.#opts.logger?.warn(errorFields(err), 'scheduler tick failed');
        this.#opts.failed?.(err);
      }
    } finally {
      this.#ticking = false;
    }
    if (this.#stopped) return;
    if (this.#wakeAgain) wait = 0;
    this.#timer = setTimeout(
      () => {
        this.#round = this.#loop();
      },
      Math.max(wait, MIN_PAUSE_MS),
    );
  }
}

/** `WorkerOptions.schedules` as an object: the scheduler's clock and idle bound. */
export type WorkerSchedulerOptions = Pick<SchedulerOptions, 'now' | 'maxIdleMs'>;

/** A worker's scheduler per its `schedules` option (default: one), or undefined when it opts out. */
export function workerScheduler(
  store: JobStore,
  opt: boolean | WorkerSchedulerOptions | undefined,
  logger: Logger,
  hooks: Pick<SchedulerOptions, 'failed' | 'succeeded' | 'listening'>,
): Scheduler | undefined {
  if (opt === false) return undefined;
  if (opt !== undefined && opt !== true && (typeof opt !== 'object' || opt === null)) {
    throw invalidArgument('Worker: schedules must be a boolean or { now?, maxIdleMs? }');
  }
  const o = typeof opt === 'object' ? opt : {};
  if (o.now !== undefined && typeof o.now !== 'function') throw invalidArgument('Worker: schedules.now must be a function returning a Date');
  if (
    o.maxIdleMs !== undefined &&
    (typeof o.maxIdleMs !== 'number' || !Number.isInteger(o.maxIdleMs) || o.maxIdleMs < 1 || o.maxIdleMs > 2_147_483_647)
  ) {
    throw invalidArgument('Worker: schedules.maxIdleMs must be a positive integer of milliseconds');
  }
  return new Scheduler(store, { ...o, logger, ...hooks });
}
