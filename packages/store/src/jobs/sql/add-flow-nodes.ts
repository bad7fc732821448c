import { plainArrayLiteral, statement, textArrayLiteral, type StatementScope } from '@q/schema/internal';
import { jobColumns } from '../row.js';
import type { JobStatus } from '../types.js';
import { MAX_NOTIFY_QUEUE_BYTES, type Queryable } from './db.js';
import { NEXT_JOB_ID } from './draw-job-ids.js';
import { nodeParams, type FlowBatch, type FlowNodeRow } from './insert-flow.js';

// Fan-out at run time (JobStore.flows.addNodes): a running node adds nodes to its own flow. In one
// transaction, each statement below in turn:
//
// 1. CALLER: the fence. The caller's row is read by its lease token and locked FOR SHARE, so a
//    stale run (its lease reaped, the job claimed again) adds nothing, and the caller cannot be
//    completed before the nodes it adds exist. Then its flow's row is locked FOR UPDATE: adds to
//    one flow are made one at a time, so two cannot take one ref.
// 2. NODES: the flow's nodes named by the call (new refs, which must be new, and the existing
//    parents), the live ones locked FOR SHARE in id order first: a live parent cannot finish
//    until the new edges to it are committed, so its release (or failure) sees them. They are
//    read by a second statement, with a snapshot taken after those locks.
// 3. INSERT: the nodes and their edges, as insert-flow.ts, with the parent counts the caller
//    worked out: the new parents, and the existing ones not yet succeeded.
const CALLER = `SELECT j.flow_id FROM __q_schema__.q_jobs j WHERE j.id = $1::int8 AND j.lease_token = $2::uuid FOR SHARE`;
const LOCK_FLOW = `SELECT f.id FROM __q_schema__.q_flows f WHERE f.id = $1::uuid FOR UPDATE`;
const LOCK_NODES = `SELECT j.id FROM __q_schema__.q_jobs j WHERE j.flow_id = $1::uuid AND j.flow_ref = ANY($2::text[]) ORDER BY j.id FOR SHARE`;
const NODES = `SELECT j.id, j.flow_ref, j.status FROM __q_schema__.q_jobs_all j WHERE j.flow_id = $1::uuid AND j.flow_ref = ANY($2::text[])`;
const INSERT = `
WITH input AS MATERIALIZED (
  SELECT i.*, ${NEXT_JOB_ID} AS id
  FROM unnest($2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::int4[], $8::int4[], $9::text[], $10::int4[])
    WITH ORDINALITY AS i(ref, uuid, queue, job_type, payload, priority, max_attempts, idempotency_key, parents, ord)
  ORDER BY i.ord
), ins AS (
  INSERT INTO __q_schema__.q_jobs AS j (id, uuid, queue, job_type, payload, priority, run_at, status, max_attempts,
                                        idempotency_key, flow_id, flow_ref, parents_left)
  OVERRIDING SYSTEM VALUE
  SELECT input.id, __q_schema__.q_job_uuid(input.id, input.uuid), input.queue, input.job_type, input.payload::jsonb, input.priority, now(),
         CASE WHEN input.parents > 0 THEN 'waiting'::__q_schema__.q_job_status ELSE 'queued'::__q_schema__.q_job_status END,
         input.max_attempts, input.idempotency_key, $1::uuid, input.ref, nullif(input.parents, 0)
  FROM input
  ORDER BY input.ord
  RETURNING j.*
), edges AS (
  INSERT INTO __q_schema__.q_job_edges (parent_id, child_id, on_failure)
  SELECT p.id, c.id, e.policy
  FROM unnest($11::int4[], $12::int4[], $13::text[]) AS e(parent, child, policy)
  JOIN input p ON p.ord = e.parent
  JOIN input c ON c.ord = e.child
), external AS (
  INSERT INTO __q_schema__.q_job_edges (parent_id, child_id, on_failure)
  SELECT e.parent_id, c.id, e.policy
  FROM unnest($14::int8[], $15::int4[], $16::text[]) AS e(parent_id, child, policy)
  JOIN input c ON c.ord = e.child
)
SELECT ${jobColumns('ins')}, ins.flow_ref,
       (SELECT count(*) FROM (SELECT pg_notify($17, 'q:' || d.queue)
                              FROM (SELECT DISTINCT queue FROM ins WHERE status = 'queued') d
                              WHERE octet_length(d.queue) < ${MAX_NOTIFY_QUEUE_BYTES}) n) AS notified
FROM ins`;

const CALLER_STMT = statement('q_jobs_add_flow_nodes_caller', CALLER);
const LOCK_FLOW_STMT = statement('q_jobs_add_flow_nodes_lock_flow', LOCK_FLOW);
const LOCK_NODES_STMT = statement('q_jobs_add_flow_nodes_lock', LOCK_NODES);
const NODES_STMT = statement('q_jobs_add_flow_nodes_read', NODES);
const INSERT_STMT = statement('q_jobs_add_flow_nodes', INSERT);

/** The flow of the job holding this lease (null: a job outside flows), locked with its flow; undefined when the lease is not held. */
export async function lockFlowOfLease(scope: StatementScope, db: Queryable, id: number, token: string): Promise<string | null | undefined> {
  const { rows } = await scope.run<{ flow_id: string | null }>(db, CALLER_STMT, [id, token]);
  const row = rows[0];
  if (!row) return undefined;
  if (row.flow_id !== null) await scope.run(db, LOCK_FLOW_STMT, [row.flow_id]);
  return row.flow_id;
}

/** The flow's nodes with these refs (live ones locked first), by ref. */
export async function lockFlowNodes(
  scope: StatementScope,
  db: Queryable,
  flowId: string,
  refs: readonly string[],
): Promise<Map<string, { id: string; status: JobStatus }>> {
  await scope.run(db, LOCK_NODES_STMT, [flowId, textArrayLiteral(refs)]);
  const { rows } = await scope.run<{ id: string; flow_ref: string; status: JobStatus }>(db, NODES_STMT, [flowId, textArrayLiteral(refs)]);
  return new Map(rows.map((r) => [r.flow_ref, { id: r.id, status: r.status }]));
}

/** Inserts `b`'s nodes into the flow, with their edges (`externalIds[k]`: the job id of `b.externalParents[k]`). */
export async function addFlowNodes(
  scope: StatementScope,
  db: Queryable,
  flowId: string,
  b: FlowBatch,
  externalIds: readonly string[],
  channel: string,
): Promise<FlowNodeRow[]> {
  const { rows } = await scope.run<FlowNodeRow>(db, INSERT_STMT, [
    flowId,
    ...nodeParams(b),
    plainArrayLiteral(externalIds),
    plainArrayLiteral(b.externalChildren),
    plainArrayLiteral(b.externalPolicies),
    channel,
  ]);
  return rows;
}
