import type { HandlerFunc } from '../job-types.js';
import { GiveUpError } from './give-up.js';

/** What `maintenance.purge` cleans; the optional parts exist when their module is installed. */
export interface PurgeTargets {
  /** Deletes succeeded/cancelled jobs finished more than `olderThanMs` ago (JobQueue.purgeFinished). */
  jobs: { purgeFinished(olderThanMs: number): Promise<number> };
  /** The request queue's results (`@q/store` RequestStore): `now` in Unix seconds. */
  results?: { expireResults(now: number, limit: number): Promise<number> };
  /** `@q/quota`: expired admissions, empty windows and slots. */
  quota?: { reapQuota(limit: number): Promise<number> };
  /** Keeps runs one at a time across processes; absent: runs are not kept apart. */
  lock?: PurgeLock;
}

/** Runs a purge only when no other runs now (the app's is an advisory lock, purge-lock.ts). */
export interface PurgeLock {
  /** Runs `fn` when the lock is free, holding it meanwhile; `{ ran: false }` when another run holds it. */
  tryRun<T>(fn: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }>;
}

/** Options of {@link maintenancePurge}. */
export interface PurgeOptions {
  /** Default age of purged jobs (ms); a job's payload may override it with `older_than_days`. */
  purgeAfterMs: number;
  /** Rows per statement when expiring results and reaping quota. */
  batchSize?: number;
  /** Upper bound of statements per target, so one run never hogs the database. */
  maxBatches?: number;
}

/** Result stored on a finished `maintenance.purge` job. */
export interface PurgeResult {
  jobs_purged: number;
  results_expired: number | null;
  quota_reaped: number | null;
  /** Set when the run did nothing because another purge was running (counts are then 0 and null). */
  skipped?: string;
}

const BUSY = 'another maintenance.purge is running';

/**
 * `maintenance.purge`: purges finished jobs older than N days, expires request results past their
 * TTL and reaps quota bookkeeping, one step each. Enqueued once per slot of the schedule
 * `akerdock.purge` (purge-schedule.ts). With `targets.lock`, a run that finds another running
 * skips (one step `purge`, skipped) instead of deleting the same rows beside it.
 */
export function maintenancePurge(targets: PurgeTargets, opts: PurgeOptions): HandlerFunc {
  const batch = opts.batchSize ?? 1_000;
  const maxBatches = opts.maxBatches ?? 100;
  const drain = async (signal: AbortSignal, step: () => Promise<number>): Promise<number> => {
    let total = 0;
    for (let i = 0; i < maxBatches && !signal.aborted; i++) {
      const n = await step();
      total += n;
      if (n < batch) break;
    }
    return total;
  };
  const run: HandlerFunc = async (job, { signal, steps }) => {
    const olderThanMs = purgeAge(job.payload, opts.purgeAfterMs);
    await steps.start('purge finished jobs');
    const jobsPurged = await targets.jobs.purgeFinished(olderThanMs);
    await steps.succeed(`${jobsPurged} job(s) finished more than ${formatAge(olderThanMs)} ago deleted`);

    let resultsExpired: number | null = null;
    if (targets.results) {
      const results = targets.results;
      await steps.start('expire results');
      resultsExpired = await drain(signal, () => results.expireResults(Math.floor(Date.now() / 1000), batch));
      await steps.succeed(`${resultsExpired} expired result(s) deleted`);
    } else {
      await steps.skip('expire results', 'request queue not installed in this schema');
    }

    let quotaReaped: number | null = null;
    if (targets.quota) {
      const quota = targets.quota;
      await steps.start('reap quota');
      quotaReaped = await drain(signal, () => quota.reapQuota(batch));
      await steps.succeed(`${quotaReaped} quota row(s) reaped`);
    } else {
      await steps.skip('reap quota', 'quota module not installed in this schema');
    }
    return { jobs_purged: jobsPurged, results_expired: resultsExpired, quota_reaped: quotaReaped } satisfies PurgeResult;
  };
  const lock = targets.lock;
  if (!lock) return run;
  return async (job, ctx) => {
    purgeAge(job.payload, opts.purgeAfterMs); // a bad payload dead-letters whether or not the lock is free
    const r = await lock.tryRun(() => run(job, ctx));
    if (r.ran) return r.value;
    await ctx.steps.skip('purge', BUSY);
    return { jobs_purged: 0, results_expired: null, quota_reaped: null, skipped: BUSY } satisfies PurgeResult;
  };
}

/**
 * Lock key of a `maintenance.purge` enqueued by hand, so that such jobs wait for each other instead
 * of skipping (scheduled ones carry none: a schedule has no lock key; `PurgeTargets.lock` keeps them apart).
 */
export const PURGE_LOCK_KEY = 'maintenance:purge';

function purgeAge(payload: unknown, dflt: number): number {
  const days = (payload as { older_than_days?: unknown } | null)?.older_than_days;
  if (days === undefined) return dflt;
  if (typeof days !== 'number' || !Number.isFinite(days) || days < 0) {
    throw new GiveUpError('maintenance.purge: "older_than_days" must be a number >= 0');
  }
  return Math.round(days * 86_400_000);
}

function formatAge(ms: number): string {
  return ms % 86_400_000 === 0 ? `${ms / 86_400_000} day(s)` : `${Math.round(ms / 1000)} s`;
}
