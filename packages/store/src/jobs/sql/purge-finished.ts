import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

// Finished jobs are in the archive. Their idempotency keys go with them (the archive's delete
// trigger q_jobs_release_key), so a key is free again once its job is purged, and not before.
// The rate slots whose window has passed go too (they count for nothing: see migration 0011);
// without this a group seen once would keep its rows for good.
//
// A flow node (migration 0014) is kept while a child of it is live: the child reads its result
// (ctx.parents) once it runs. A purged node takes its edges with it, and a flow whose last node
// is purged goes too (its idempotency key free again, as a job's is). A purged node's span
// (q_flow_spans, migration 0015) goes with it.
const TEXT = `
WITH slots AS (
  DELETE FROM __q_schema__.q_job_rate_slots WHERE started_at < now() - window_ms * interval '1 millisecond'
), gone AS (
  DELETE FROM __q_schema__.q_jobs_archive a
  WHERE a.status IN ('succeeded', 'cancelled') AND a.finished_at < now() - $1 * interval '1 millisecond'
    AND (a.flow_id IS NULL
         OR NOT EXISTS (SELECT 1 FROM __q_schema__.q_job_edges e JOIN __q_schema__.q_jobs c ON c.id = e.child_id WHERE e.parent_id = a.id))
  RETURNING a.id, a.flow_id
), nodes AS (
  SELECT id, flow_id FROM gone WHERE flow_id IS NOT NULL
), out_edges AS (
  DELETE FROM __q_schema__.q_job_edges e WHERE e.parent_id IN (SELECT id FROM nodes)
), in_edges AS (
  DELETE FROM __q_schema__.q_job_edges e WHERE e.child_id IN (SELECT id FROM nodes)
), spans AS (
  DELETE FROM __q_schema__.q_flow_spans s WHERE s.job_id IN (SELECT id FROM nodes)
), flows AS (
  DELETE FROM __q_schema__.q_flows f
  WHERE f.id IN (SELECT flow_id FROM nodes)
    AND NOT EXISTS (SELECT 1 FROM __q_schema__.q_jobs j WHERE j.flow_id = f.id)
    AND NOT EXISTS (SELECT 1 FROM __q_schema__.q_jobs_archive a WHERE a.flow_id = f.id AND a.id NOT IN (SELECT id FROM nodes))
)
SELECT count(*)::int AS n FROM gone`;

const TEXT_STMT = statement('q_jobs_purge', TEXT);

/** Deletes succeeded/cancelled jobs finished more than `olderThanMs` ago (and spent rate slots); returns the jobs' count. */
export async function purgeFinished(scope: StatementScope, db: Queryable, olderThanMs: number): Promise<number> {
  const { rows } = await scope.run<{ n: number }>(db, TEXT_STMT, [olderThanMs]);
  return rows[0]?.n ?? 0;
}
