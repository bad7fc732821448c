import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

// Every live node of one flow, as cancel-job.ts does one job: a waiting, queued, scheduled or
// retry_wait node is cancelled at once (and archived by the table's trigger, whose flow trigger
// then finds its children cancelled by this same statement), a leased or running one gets
// cancel_requested_at and its worker is told on the channel ($2); it ends cancelled, and never
// starts when it is prefetched. The nodes are locked in id order first, like the release, so a
// cancel and completions of the flow's parents wait for each other instead of deadlocking.
const TEXT = `
WITH locked AS (
  SELECT id FROM __q_schema__.q_jobs WHERE flow_id = $1::uuid ORDER BY id FOR UPDATE
), c AS (
  UPDATE __q_schema__.q_jobs AS jobs SET
    status = CASE WHEN status IN ('queued', 'scheduled', 'retry_wait', 'waiting') THEN 'cancelled'::__q_schema__.q_job_status ELSE status END,
    finished_at = CASE WHEN status IN ('queued', 'scheduled', 'retry_wait', 'waiting') THEN now() ELSE finished_at END,
    cancel_requested_at = coalesce(cancel_requested_at, now()),
    updated_at = now()
  FROM locked
  WHERE jobs.id = locked.id AND jobs.flow_id = $1::uuid
    AND jobs.status IN ('queued', 'scheduled', 'retry_wait', 'waiting', 'leased', 'running')
  RETURNING jobs.id, jobs.status
)
SELECT count(*) FILTER (WHERE status = 'cancelled')::int AS cancelled,
       count(*) FILTER (WHERE status <> 'cancelled')::int AS requested,
       (SELECT count(*) FROM (SELECT pg_notify($2, 'c:' || c2.id) FROM c c2 WHERE c2.status <> 'cancelled') n) AS notified
FROM c`;

const TEXT_STMT = statement('q_jobs_cancel_flow', TEXT);

/** How many of the flow's nodes were cancelled at once, and how many running ones were asked to stop. */
export interface FlowCancelled {
  cancelled: number;
  cancelRequested: number;
}

/** Cancels every live node of the flow (see above). */
export async function cancelFlow(scope: StatementScope, db: Queryable, flowId: string, channel: string): Promise<FlowCancelled> {
  const { rows } = await scope.run<{ cancelled: number; requested: number }>(db, TEXT_STMT, [flowId, channel]);
  return { cancelled: rows[0]?.cancelled ?? 0, cancelRequested: rows[0]?.requested ?? 0 };
}
