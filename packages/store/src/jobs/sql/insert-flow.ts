import { plainArrayLiteral, statement, textArrayLiteral, type StatementScope } from '@q/schema/internal';
import { jobColumns, type JobRow } from '../row.js';
import type { FlowFailurePolicy } from '../types.js';
import { MAX_NOTIFY_QUEUE_BYTES, type Queryable } from './db.js';
import { NEXT_JOB_ID } from './draw-job-ids.js';
import type { CheckedFlowRequest } from '../flow-request.js';

/** A checked flow as the column arrays of its insert; index i of the node arrays is node i. */
export interface FlowBatch {
  name: string | null;
  idempotencyKey: string | null;
  refs: string[];
  /** Random uuids: each node's job stores `q_job_uuid(id, uuid)` (see jobUuid). */
  uuids: string[];
  queues: string[];
  types: string[];
  /** JSON text. */
  payloads: string[];
  priorities: number[];
  maxAttempts: number[];
  idempotencyKeys: Array<string | null>;
  /** How many parents each node has: a node with none is queued, the others wait. */
  parents: number[];
  /** Edge k: node `edgeParents[k]` (1-based) is a parent of node `edgeChildren[k]`, with `edgePolicies[k]`. */
  edgeParents: number[];
  edgeChildren: number[];
  edgePolicies: FlowFailurePolicy[];
  /**
   * Edges from nodes already in the flow (JobStore.flows.addNodes only; empty for a new flow): the
   * parent's ref, the child's position (1-based) and the policy.
   */
  externalParents: string[];
  externalChildren: number[];
  externalPolicies: FlowFailurePolicy[];
  /** Each node's request when it is an inference step (its node's payload carries it to the send trigger of migration 0015), else null. */
  requests: Array<CheckedFlowRequest | null>;
}

// One statement inserts the whole graph: the flow row, every node's job (ids drawn in the
// batch's order, a topological one: every parent's id is below its children's), and every edge, joined to the
// nodes by their position. A flow idempotency key another flow holds inserts nothing (the
// unique index waits for a concurrent insert of the key to commit or roll back first), and no
// row comes back: the caller then reads that flow. A node whose own idempotency key
// another job holds is skipped by the insert trigger (q_jobs_before_insert): the caller finds a
// node missing and rolls the transaction back. Nodes without parents are queued at the
// database's now, and their queues are notified (delivered at commit); the others wait for
// their parents (migrations 0014 and 0015, q_jobs_flow_finished). An inference step without
// parents is sent by the insert trigger of migration 0015 and comes back `waiting` for its result,
// so its queue is not notified.
const TEXT = `
WITH f AS (
  INSERT INTO __q_schema__.q_flows AS f (name, idempotency_key) VALUES ($1::text, $2::text)
  ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
  RETURNING f.id
), input AS MATERIALIZED (
  SELECT i.*, ${NEXT_JOB_ID} AS id
  FROM unnest($3::text[], $4::uuid[], $5::text[], $6::text[], $7::text[], $8::int4[], $9::int4[], $10::text[], $11::int4[])
    WITH ORDINALITY AS i(ref, uuid, queue, job_type, payload, priority, max_attempts, idempotency_key, parents, ord)
  WHERE EXISTS (SELECT 1 FROM f)
  ORDER BY i.ord
), ins AS (
  INSERT INTO __q_schema__.q_jobs AS j (id, uuid, queue, job_type, payload, priority, run_at, status, max_attempts,
                                        idempotency_key, flow_id, flow_ref, parents_left)
  OVERRIDING SYSTEM VALUE
  SELECT input.id, __q_schema__.q_job_uuid(input.id, input.uuid), input.queue, input.job_type, input.payload::jsonb, input.priority, now(),
         CASE WHEN input.parents > 0 THEN 'waiting'::__q_schema__.q_job_status ELSE 'queued'::__q_schema__.q_job_status END,
         input.max_attempts, input.idempotency_key, f.id, input.ref, nullif(input.parents, 0)
  FROM input CROSS JOIN f
  ORDER BY input.ord
  RETURNING j.*
), edges AS (
  INSERT INTO __q_schema__.q_job_edges (parent_id, child_id, on_failure)
  SELECT p.id, c.id, e.policy
  FROM unnest($12::int4[], $13::int4[], $14::text[]) AS e(parent, child, policy)
  JOIN input p ON p.ord = e.parent
  JOIN input c ON c.ord = e.child
)
SELECT (SELECT id FROM f) AS flow_id, ${jobColumns('ins')}, ins.flow_ref,
       (SELECT count(*) FROM (SELECT pg_notify($15, 'q:' || d.queue)
                              FROM (SELECT DISTINCT queue FROM ins WHERE status = 'queued') d
                              WHERE octet_length(d.queue) < ${MAX_NOTIFY_QUEUE_BYTES}) n) AS notified
FROM ins`;

const TEXT_STMT = statement('q_jobs_insert_flow', TEXT);

/** A node's job as the insert returns it: the job row and the node's ref. */
export interface FlowNodeRow extends JobRow {
  flow_ref: string | null;
}

/** What the insert did: the new flow's id and its nodes' jobs, or `flowId` null and no rows (the key is held). */
export interface InsertedFlow {
  flowId: string | null;
  rows: FlowNodeRow[];
}

/**
 * The node and edge arrays of a flow batch, in the order both node inserts (this one and
 * add-flow-nodes.ts) take them: refs, uuids, queues, types, payloads, priorities, max attempts,
 * idempotency keys, parent counts, then the edges' parents, children and policies.
 */
export function nodeParams(b: FlowBatch): string[] {
  return [
    textArrayLiteral(b.refs),
    plainArrayLiteral(b.uuids),
    textArrayLiteral(b.queues),
    textArrayLiteral(b.types),
    textArrayLiteral(b.payloads),
    plainArrayLiteral(b.priorities),
    plainArrayLiteral(b.maxAttempts),
    textArrayLiteral(b.idempotencyKeys),
    plainArrayLiteral(b.parents),
    plainArrayLiteral(b.edgeParents),
    plainArrayLiteral(b.edgeChildren),
    plainArrayLiteral(b.edgePolicies),
  ];
}

/** Inserts the flow, its nodes and its edges in one statement (see above); notifies `channel`. */
export async function insertFlow(scope: StatementScope, db: Queryable, b: FlowBatch, channel: string): Promise<InsertedFlow> {
  const { rows } = await scope.run<FlowNodeRow & { flow_id: string | null }>(db, TEXT_STMT, [
    b.name,
    b.idempotencyKey,
    ...nodeParams(b),
    channel,
  ]);
  return { flowId: rows[0]?.flow_id ?? null, rows };
}
