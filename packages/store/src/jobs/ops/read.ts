// Reading jobs (by uuid, by id, one page of a filtered list): the admin side of the store, which
// never takes a lease. Kept apart from the store facade with its filter checks and paging.
import { invalidArgument } from '@q/schema';
import { checkName } from '@q/schema/internal';
import { decodeCursor, encodeCursor } from '../cursor.js';
import { toJob } from '../row.js';
import { getJobById, getJobByUuid } from '../sql/get-job.js';
import { listJobs } from '../sql/list-jobs.js';
import type { Job, JobListFilter, JobPage } from '../types.js';
import { checkStatus, checkUuid } from '../validate.js';
import type { JobStoreContext } from './context.js';

const DEFAULT_LIST_LIMIT = 25;

/** `JobStore.get`. */
export async function get(ctx: JobStoreContext, uuid: string): Promise<Job | null> {
  checkUuid(uuid);
  const row = await ctx.op('get', () => getJobByUuid(ctx.scope, ctx.pool, uuid));
  return row ? toJob(row) : null;
}

/** `JobStore.getById`. */
export async function getById(ctx: JobStoreContext, id: number): Promise<Job | null> {
  if (!Number.isSafeInteger(id)) throw invalidArgument('id must be a safe integer');
  const row = await ctx.op('get', () => getJobById(ctx.scope, ctx.pool, id));
  return row ? toJob(row) : null;
}

/** `JobStore.list`: checks the filter, reads one page (one row more, to know whether another follows). */
export async function list(ctx: JobStoreContext, filter: JobListFilter = {}): Promise<JobPage> {
  const limit = filter.limit ?? DEFAULT_LIST_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw invalidArgument('limit must be between 1 and 100');
  const status = filter.status === undefined ? null : checkStatus(filter.status);
  for (const k of ['queue', 'type'] as const) {
    if (filter[k] !== undefined) checkName('list', k, filter[k], { allowEmpty: true });
  }
  if (filter.teamId !== undefined && !Number.isSafeInteger(filter.teamId)) throw invalidArgument('teamId must be a safe integer');
  const beforeId = filter.cursor === undefined || filter.cursor === null ? null : decodeCursor(filter.cursor);
  const rows = await ctx.op('list', () =>
    listJobs(ctx.scope, ctx.pool, {
      status,
      queue: filter.queue ?? null,
      type: filter.type ?? null,
      teamId: filter.teamId ?? null,
      beforeId,
      limit: limit + 1,
    }),
  );
  const jobs = rows.slice(0, limit).map(toJob);
  const last = jobs[jobs.length - 1];
  return { jobs, nextCursor: rows.length > limit && last ? encodeCursor(last.id) : null };
}
