import { statement, type StatementScope } from '@q/schema';
import type { JobStatus } from '../types.js';
import type { Queryable } from './db.js';

// One grouped count per collection, over the statuses a job can leave (not succeeded/cancelled,
// which only grow with history): the partial indexes on those statuses serve it.
const COUNT = statement(
  'q_jobs_count_backlog',
  `SELECT queue, status::text AS status, count(*)::int8 AS n FROM __q_schema__.q_jobs
   WHERE status IN ('scheduled', 'queued', 'leased', 'running', 'retry_wait', 'dead_letter')
   GROUP BY queue, status`,
);

/** Jobs per queue and live status (and dead letter). */
export async function countBacklog(scope: StatementScope, db: Queryable): Promise<Array<{ queue: string; status: JobStatus; count: number }>> {
  const { rows } = await scope.run<{ queue: string; status: JobStatus; n: string }>(db, COUNT, []);
  return rows.map((r) => ({ queue: r.queue, status: r.status, count: Number(r.n) }));
}
