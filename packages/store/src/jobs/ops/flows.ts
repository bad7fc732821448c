// Flows (#41): a job graph inserted in one call, through the pool or the caller's transaction.
// The release of children and the failure policies are not here: the trigger of migration 0014
// (q_jobs_flow_finished) applies them in the transaction that finishes each parent.
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import { withTransaction } from '@q/schema/internal';
import { checkInTransaction, inCallerTransaction, type InTransaction } from '../../transaction.js';
import { toJob } from '../row.js';
import type { Queryable } from '../sql/db.js';
import { getFlowEdges, getFlowRow, getFlowNodes } from '../sql/get-flow.js';
import { insertFlow, type FlowBatch, type FlowNodeRow } from '../sql/insert-flow.js';
import { FINISHED_STATUSES } from '../finish-waiters.js';
import type { FlowFailurePolicy, FlowInfo, FlowResult, Job, JobLease, NewFlow } from '../types.js';
import { checkLease, toFlowBatch } from '../validate.js';
import { addFlowNodes, lockFlowNodes, lockFlowOfLease } from '../sql/add-flow-nodes.js';
import type { JobStoreContext } from './context.js';

/** `JobStore.flow`: checks the graph, then inserts it in one transaction (its own or the caller's, behind a savepoint). */
export async function flow(ctx: JobStoreContext, input: NewFlow, tx?: InTransaction): Promise<FlowResult> {
  const client = tx === undefined ? undefined : checkInTransaction('flow', tx);
  const batch = toFlowBatch(input);
  const attributes = { 'job.count': batch.refs.length, 'job.in_transaction': client !== undefined };
  if (client) return ctx.op('flow', () => inCallerTransaction('flow', client, () => insert(ctx, client, batch)), attributes);
  return ctx.op('flow', () => withTransaction(ctx.pool, (c) => insert(ctx, c, batch)), attributes);
}

/**
 * One insert, then: no row means the flow's idempotency key is held, so that flow is read and
 * returned; fewer rows than nodes means a node's own idempotency key is held by another job,
 * which fails the call (`DUPLICATE`, naming the node) and so rolls the transaction back.
 */
async function insert(ctx: JobStoreContext, db: Queryable, batch: FlowBatch): Promise<FlowResult> {
  const inserted = await insertFlow(ctx.scope, db, batch, ctx.channel);
  if (inserted.flowId === null) {
    const held = await getFlowRow(ctx.scope, db, null, batch.idempotencyKey);
    if (!held) throw new QError(QErrorCode.NOT_FOUND, 'flow: the flow holding this idempotency key was deleted meanwhile');
    return { flowId: held.id, created: false, jobs: byRef(await getFlowNodes(ctx.scope, db, held.id)) };
  }
  if (inserted.rows.length < batch.refs.length) {
    const got = new Set(inserted.rows.map((r) => r.flow_ref));
    const ref = batch.refs.find((r) => !got.has(r));
    throw new QError(QErrorCode.DUPLICATE, `flow: node ${JSON.stringify(ref)} has an idempotencyKey another job holds in its queue and type`);
  }
  return { flowId: inserted.flowId, created: true, jobs: byRef(inserted.rows) };
}

/** The nodes' jobs by their ref. */
export function byRef(rows: readonly FlowNodeRow[]): Record<string, Job> {
  const out: Record<string, Job> = {};
  for (const r of rows) if (r.flow_ref !== null) out[r.flow_ref] = toJob(r);
  return out;
}

/**
 * `JobStore.getFlow`: the flow's row, its nodes and its edges, or null for an unknown id. Three
 * reads on the pool: a node finishing between them shows in its job, never as a missing edge
 * (an edge is deleted only by the `ignore` policy).
 */
export async function getFlow(ctx: JobStoreContext, flowId: string): Promise<FlowInfo | null> {
  return ctx.op('getFlow', async () => {
    const row = await getFlowRow(ctx.scope, ctx.pool, flowId, null);
    if (!row) return null;
    const [nodes, edges] = await Promise.all([getFlowNodes(ctx.scope, ctx.pool, flowId), getFlowEdges(ctx.scope, ctx.pool, flowId)]);
    const refOf = new Map(nodes.map((n) => [n.id, n.flow_ref ?? n.id]));
    const jobs = byRef(nodes);
    const all = Object.values(jobs);
    const finished = all.length > 0 && all.every((j) => FINISHED_STATUSES.includes(j.status));
    return {
      id: row.id,
      name: row.name,
      idempotencyKey: row.idempotency_key,
      createdAt: row.created_at,
      finishedAt: finished ? new Date(Math.max(...all.map((j) => j.finishedAt?.getTime() ?? 0))) : null,
      nodes: jobs,
      edges: edges.map((e) => ({
        parent: refOf.get(e.parent_id) ?? e.parent_id,
        child: refOf.get(e.child_id) ?? e.child_id,
        onFailure: e.on_failure as FlowFailurePolicy,
      })),
    };
  });
}

/**
 * `JobStore.addFlowNodes`: a running node adds nodes to its own flow (see sql/add-flow-nodes.ts),
 * fenced by its lease: `null` when the lease is no longer held, and nothing is written.
 */
export async function addNodes(ctx: JobStoreContext, lease: JobLease, nodes: NewFlow['nodes']): Promise<Record<string, Job> | null> {
  checkLease(lease);
  const batch = toFlowBatch({ nodes }, { external: true });
  return ctx.op(
    'addFlowNodes',
    () =>
      withTransaction(ctx.pool, async (c) => {
        const flowId = await lockFlowOfLease(ctx.scope, c, lease.id, lease.leaseToken);
        if (flowId === undefined) return null;
        if (flowId === null) throw new QError(QErrorCode.INVALID_STATE, 'addFlowNodes: the job must be a node of a flow');
        const named = [...new Set([...batch.refs, ...batch.externalParents])];
        const existing = await lockFlowNodes(ctx.scope, c, flowId, named);
        for (const ref of batch.refs) {
          if (existing.has(ref)) throw invalidArgument(`addFlowNodes: node ${JSON.stringify(ref)} ref must be new in its flow`);
        }
        const externalIds = batch.externalParents.map((ref, k) => {
          const parent = existing.get(ref);
          const child = JSON.stringify(batch.refs[(batch.externalChildren[k] ?? 1) - 1]);
          if (!parent) throw invalidArgument(`addFlowNodes: node ${child} must depend on nodes of the flow, ${JSON.stringify(ref)} is not one`);
          if (parent.status === 'dead_letter' || parent.status === 'cancelled') {
            throw new QError(
              QErrorCode.INVALID_STATE,
              `addFlowNodes: node ${child} depends on ${JSON.stringify(ref)}, which ended ${parent.status}`,
            );
          }
          return parent.id;
        });
        // A parent not yet succeeded is one more to wait for (locked above: it cannot finish before this commits).
        batch.externalParents.forEach((ref, k) => {
          const at = (batch.externalChildren[k] ?? 1) - 1;
          if (existing.get(ref)?.status !== 'succeeded') batch.parents[at] = (batch.parents[at] ?? 0) + 1;
        });
        return byRef(await addFlowNodes(ctx.scope, c, flowId, batch, externalIds, ctx.channel));
      }),
    { 'job.count': batch.refs.length },
  );
}
