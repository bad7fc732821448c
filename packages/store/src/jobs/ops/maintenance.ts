// The job table's maintenance, by role: the reaper (`reapExpired`: jobs whose lease lapsed go
// back to retry_wait, or to the dead letter after maxResumes crashes), the promoter (`promoteDue`:
// scheduled and retry_wait jobs whose run_at came become queued), and both as one round under a
// lock (`maintain`; a maintenance leader's fenced round: `maintainFenced` in leadership.ts). Pruning
// finished jobs (`JobStore.purgeFinished`) is the store's own, run by applications on a schedule.
import { tryMaintenanceXactLock } from '../sql/maintenance-lock.js';
import { promoteDueJobs } from '../sql/promote-due-jobs.js';
import { reapExpiredLeases } from '../sql/reap-expired-leases.js';
import { carefully, robustRound, roundSteps, type MaintenanceFailure } from './maintenance-round.js';
import type { ReapedJob } from '../types.js';
import { checkMaxResumes } from '../validate.js';
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

/** The promoter: `JobStore.promoteDue` (a job it cannot promote is dead-lettered, see maintenance-round.ts). */
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

/** The reaper: `JobStore.reapExpired` (a job it cannot reap is dead-lettered, see maintenance-round.ts). */
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

/** `JobStore.maintain`: the reaper then the promoter, in one transaction under the maintenance lock. */
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
