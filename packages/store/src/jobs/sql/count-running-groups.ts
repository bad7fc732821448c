import { statement, type StatementScope } from '@q/schema/internal';
import type { GroupRunning } from '../types.js';
import type { Queryable } from './db.js';

// The predicate of q_jobs_lease_expiry_idx (leased or running): the count reads only the jobs in
// flight, never the queued backlog or the history.
const TEXT = `
SELECT queue, job_group, count(*)::int AS running FROM __q_schema__.q_jobs
WHERE status IN ('leased', 'running') AND job_group IS NOT NULL AND ($1::text IS NULL OR queue = $1::text)
GROUP BY queue, job_group
ORDER BY running DESC, queue, job_group
LIMIT $2`;

const TEXT_STMT = statement('q_jobs_count_running_groups', TEXT);

/** The groups with jobs leased or running, most first (at most `limit`; of `queue` only when given). */
export async function countRunningGroups(scope: StatementScope, db: Queryable, queue: string | null, limit: number): Promise<GroupRunning[]> {
  const { rows } = await scope.run<{ queue: string; job_group: string; running: number }>(db, TEXT_STMT, [queue, limit]);
  return rows.map((r) => ({ queue: r.queue, group: r.job_group, running: r.running }));
}
