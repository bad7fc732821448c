// Maintenance and administration of the job table: reaping lapsed leases, promoting due jobs
// (alone or as one locked round), cancelling, forgetting dead letters and purging finished jobs.
// Kept apart from the store facade: none of it runs on a worker's hot path.
import { invalidArgument } from '@q/schema';
import { cancelJob } from '../sql/cancel-job.js';
import { forgetDeadLetter as forgetDeadLetterRow } from '../sql/forget-dead-letter.js';
import { tryMaintenanceXactLock } from '../sql/maintenance-lock.js';
import { promoteDueJobs } from '../sql/promote-due-jobs.js';
import { purgeFinished as purgeFinishedRows } from '../sql/purge-finished.js';
import { reapExpiredLeases } from '../sql/reap-expired-leases.js';
import { carefully, robustRound, roundSteps, type MaintenanceFailure } from './maintenance-round.js';
import type { CancelOutcome, ReapedJob } from '../types.js';
import { MAX_DELAY_MS, checkMaxResumes, checkUuid } from '../validate.js';
import type { JobStoreContext } from './context.js';

/** Result of `JobStore.maintain`. */
export interface MaintenanceResult {
  reaped: ReapedJob[];
  promoted: number;
  /**
   * Jobs the round could not reap or promote (a row the statement fails on), dead-lettered with
   * the error so that the rest of the table goes on. Usually empty.
   */
  failed: MaintenanceFailure[];
}

/** `JobStore.promoteDue` (a job it cannot promote is dead-lettered, see maintenance-round.ts). */
export async function promoteDue(ctx: JobStoreContext): Promise<number> {
  const promoted = await ctx.op('promote', () =>
    carefully(
      () => promoteDueJobs(ctx.scope, ctx.pool, ctx.channel),
      async () => (await robustRound(ctx.pool, (client) => roundSteps(ctx.scope, client, ctx.channel, 0, true, 'promote'))).promoted,
    ),
  );
  if (promoted > 0) ctx.starts.forget();
  return promoted;
}

/** `JobStore.reapExpired` (a job it cannot reap is dead-lettered, see maintenance-round.ts). */
export async function reapExpired(ctx: JobStoreContext, maxResumes: number): Promise<ReapedJob[]> {
  checkMaxResumes(maxResumes);
  const rows = await ctx.op('reap', () =>
    carefully(
      async () => (await reapExpiredLeases(ctx.scope, ctx.pool, maxResumes)).map((r) => ({ id: Number(r.id), uuid: r.uuid, status: r.status })),
      async () => (await robustRound(ctx.pool, (client) => roundSteps(ctx.scope, client, ctx.channel, maxResumes, true, 'reap'))).reaped,
    ),
  );
  if (rows.length > 0) ctx.starts.forget();
  return rows;
}

/** `JobStore.maintain`. */
export async function maintain(ctx: JobStoreContext, maxResumes: number): Promise<MaintenanceResult | null> {
  checkMaxResumes(maxResumes);
  const result = await ctx.op('maintain', () =>
    robustRound(ctx.pool, async (client, careful) => {
      if (!(await tryMaintenanceXactLock(ctx.scope, client))) return null;
      return roundSteps(ctx.scope, client, ctx.channel, maxResumes, careful);
    }),
  );
  if (result !== null && (result.reaped.length > 0 || result.promoted > 0 || result.failed.length > 0)) ctx.starts.forget();
  return result;
}

/** `JobStore.cancel`. */
export async function cancel(ctx: JobStoreContext, uuid: string): Promise<CancelOutcome> {
  checkUuid(uuid);
  const row = await ctx.op('cancel', () => cancelJob(ctx.scope, ctx.pool, uuid, ctx.channel));
  if (!row) return 'not_cancellable';
  return row.status === 'cancelled' ? 'cancelled' : 'cancel_requested';
}

/** `JobStore.forgetDeadLetter`. */
export async function forgetDeadLetter(ctx: JobStoreContext, uuid: string): Promise<boolean> {
  checkUuid(uuid);
  return ctx.op('forget', () => forgetDeadLetterRow(ctx.scope, ctx.pool, uuid));
}

/** `JobStore.purgeFinished`. */
export async function purgeFinished(ctx: JobStoreContext, olderThanMs: number): Promise<number> {
  if (typeof olderThanMs !== 'number' || !Number.isFinite(olderThanMs) || olderThanMs < 0 || olderThanMs > MAX_DELAY_MS) {
    throw invalidArgument('olderThanMs must be a non-negative number of milliseconds, at most 100 years');
  }
  return ctx.op('purge', () => purgeFinishedRows(ctx.scope, ctx.pool, olderThanMs));
}
