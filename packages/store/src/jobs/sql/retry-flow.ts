import { statement, type StatementScope } from '@q/schema/internal';
import { FLOW_REQUEST_TYPE } from '../types.js';
import { MAX_NOTIFY_QUEUE_BYTES, type Queryable } from './db.js';

// Runs a flow's failed nodes again, in place: each node in the dead letter or cancelled (with
// $2, also every finished node downstream of one) moves from the archive back to q_jobs under its
// own id and uuid, so its edges still hold, as a fresh job: no attempt used, no error, result,
// steps or lease, `waiting` on those of its parents that are not succeeded (or are retried with
// it), else `queued` now (its queue notified, $3). A waiting node outside the retry that depends
// on a retried one (its edge `continue`: any other would have failed or cancelled it) waits for
// it again. The archive's delete trigger frees each moved node's idempotency key at the end of
// the statement; RECLAIM_KEYS, run next in the same transaction, holds them again. A failed
// inference step comes back like any node: inserted `queued`, it is sent at once as a new
// request by the insert trigger of migration 0015 (from the spec kept for it), or later by its
// release. A `q:request` row with no spec (written by hand) has nothing to send: it and every node below it
// (`unsendable`) stay as they are, so none waits for it for ever.
const TEXT = `
WITH RECURSIVE down(id) AS (
  SELECT a.id FROM __q_schema__.q_jobs_archive a WHERE a.flow_id = $1::uuid AND a.status IN ('dead_letter', 'cancelled')
  UNION
  SELECT e.child_id FROM down d JOIN __q_schema__.q_job_edges e ON e.parent_id = d.id WHERE $2::bool
), unsendable(id) AS (
  SELECT a.id FROM __q_schema__.q_jobs_archive a
  WHERE a.flow_id = $1::uuid AND a.status IN ('dead_letter', 'cancelled') AND a.job_type = '${FLOW_REQUEST_TYPE}'
    AND NOT EXISTS (SELECT 1 FROM __q_schema__.q_flow_request_specs s WHERE s.job_id = a.id)
  UNION
  SELECT e.child_id FROM unsendable u JOIN __q_schema__.q_job_edges e ON e.parent_id = u.id
), target AS (
  SELECT a.id FROM __q_schema__.q_jobs_archive a
  WHERE a.id IN (SELECT id FROM down) AND a.id NOT IN (SELECT id FROM unsendable) AND a.flow_id = $1::uuid
), moved AS (
  DELETE FROM __q_schema__.q_jobs_archive a WHERE a.id IN (SELECT id FROM target) RETURNING a.*
), ins AS (
  INSERT INTO __q_schema__.q_jobs (id, uuid, queue, job_type, payload, status, priority, run_at, attempt, max_attempts,
    idempotency_key, lock_key, retry_of_id, team_id, resource_id, correlation_id, created_at, updated_at, progress, job_key,
    job_group, flow_id, flow_ref, parents_left)
  OVERRIDING SYSTEM VALUE
  SELECT m.id, m.uuid, m.queue, m.job_type, m.payload,
         CASE WHEN l.n > 0 THEN 'waiting'::__q_schema__.q_job_status ELSE 'queued'::__q_schema__.q_job_status END,
         m.priority, now(), 0, m.max_attempts, m.idempotency_key, m.lock_key, m.retry_of_id, m.team_id, m.resource_id,
         m.correlation_id, m.created_at, now(), m.progress, m.job_key, m.job_group, m.flow_id, m.flow_ref, nullif(l.n, 0)
  FROM moved m
  CROSS JOIN LATERAL (
    SELECT count(*)::int AS n FROM __q_schema__.q_job_edges e
    WHERE e.child_id = m.id
      AND (e.parent_id IN (SELECT id FROM target)
           OR NOT EXISTS (SELECT 1 FROM __q_schema__.q_jobs_archive p WHERE p.id = e.parent_id AND p.status = 'succeeded'))
  ) l
  ORDER BY m.id
  RETURNING id, status, queue
), rewait AS (
  UPDATE __q_schema__.q_jobs c SET parents_left = c.parents_left + x.n, updated_at = now()
  FROM (SELECT e.child_id, count(*)::int AS n FROM __q_schema__.q_job_edges e
        WHERE e.parent_id IN (SELECT id FROM target) AND e.child_id NOT IN (SELECT id FROM target) GROUP BY e.child_id) x
  WHERE c.id = x.child_id AND c.status = 'waiting'
)
SELECT coalesce(array_agg(ins.id), '{}') AS ids,
       (SELECT count(*) FROM (SELECT pg_notify($3, 'q:' || d.queue)
                              FROM (SELECT DISTINCT queue FROM ins WHERE status = 'queued') d
                              WHERE octet_length(d.queue) < ${MAX_NOTIFY_QUEUE_BYTES}) n) AS notified
FROM ins`;

// The moved nodes' idempotency keys, held again (see above): each by its own job.
const RECLAIM_KEYS = `
INSERT INTO __q_schema__.q_jobs_idempotency_keys (scope, job_id)
SELECT __q_schema__.q_idempotency_scope(queue, job_type, idempotency_key), id
FROM __q_schema__.q_jobs WHERE id = ANY($1::int8[]) AND idempotency_key IS NOT NULL
ON CONFLICT (scope) DO NOTHING`;

const TEXT_STMT = statement('q_jobs_retry_flow', TEXT);
const RECLAIM_STMT = statement('q_jobs_retry_flow_keys', RECLAIM_KEYS);

/** Moves the flow's failed nodes (and with `downstream` the finished nodes below them) back to run; returns their ids. Run in a transaction. */
export async function retryFlow(scope: StatementScope, db: Queryable, flowId: string, downstream: boolean, channel: string): Promise<number[]> {
  const { rows } = await scope.run<{ ids: string[] }>(db, TEXT_STMT, [flowId, downstream, channel]);
  const ids = (rows[0]?.ids ?? []).map(Number);
  if (ids.length > 0) await scope.run(db, RECLAIM_STMT, [ids]);
  return ids;
}
