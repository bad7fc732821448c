import { statement, type StatementScope } from '@q/schema/internal';
import type { JobStatus } from '../types.js';
import type { Queryable } from './db.js';

// One grouped count per collection, over the statuses a job can leave (not succeeded/cancelled,
// which only grow with history). Each branch of the UNION ALL spells out the predicate of one
// partial index (q_jobs_dequeue_idx, q_jobs_lease_expiry_idx, q_jobs_waiting_run_at_idx, and
// q_jobs_archive_status_id_idx for the dead letter, which is a finished job and so archived), so
// the count reads only those rows, never the history of succeeded and cancelled jobs.
/** The backlog count (exported for the plan test). */
export const COUNT_BACKLOG = statement(
  'q_jobs_count_backlog',
  `SELECT queue, status::text AS status, count(*)::int8 AS n FROM (
     SELECT queue, status FROM __q_schema__.q_jobs WHERE status = 'queued'
     UNION ALL SELECT queue, status FROM __q_schema__.q_jobs WHERE status IN ('leased', 'running')
     UNION ALL SELECT queue, status FROM __q_schema__.q_jobs WHERE status IN ('scheduled', 'retry_wait')
     UNION ALL SELECT queue, status FROM __q_schema__.q_jobs_archive WHERE status = 'dead_letter'
   ) live GROUP BY queue, status`,
);

/** Jobs per queue and live status (and dead letter). */
export async function countBacklog(scope: StatementScope, db: Queryable): Promise<Array<{ queue: string; status: JobStatus; count: number }>> {
  const { rows } = await scope.run<{ queue: string; status: JobStatus; n: string }>(db, COUNT_BACKLOG, []);
  return rows.map((r) => ({ queue: r.queue, status: r.status, count: Number(r.n) }));
}
