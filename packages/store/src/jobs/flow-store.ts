// The flows of a job table (#41): job graphs inserted in one call (through the pool or the
// caller's transaction), read, waited for, cancelled, retried, and grown at run time by a running
// node. The release of children and the failure policies are not here: the trigger of migration
// 0015 (q_jobs_flow_finished) applies them in the statement that finishes the parents.
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import { withTransaction } from '@q/schema/internal';
import { checkInTransaction, inCallerTransaction, type InTransaction } from '../transaction.js';
import { toJob } from './row.js';
import type { Queryable } from './sql/db.js';
import { getFlowEdges, getFlowRow, getFlowNodes } from './sql/get-flow.js';
import { insertFlow, type FlowBatch, type FlowNodeRow } from './sql/insert-flow.js';
import { FINISHED_STATUSES, type WaitForOptions } from './finish-waiters.js';
import type { FlowFailurePolicy, FlowInfo, FlowNode, FlowParent, FlowResult, Job, JobLease, NewFlow } from './types.js';
import { checkJobId, checkLease, checkUuid, toFlowBatch } from './validate.js';
import { addFlowNodes, lockFlowNodes, lockFlowOfLease } from './sql/add-flow-nodes.js';
import type { JobStoreContext } from './ops/context.js';
import { cancelFlow, type FlowCancelled } from './sql/cancel-flow.js';
import { recordFlowSpan } from './sql/flow-span.js';
import { getFlowParents } from './sql/get-flow-parents.js';
import { retryFlow } from './sql/retry-flow.js';
import { splitErrorText } from './error-text.js';

/**
 * The flows of one job table, as `JobStore.flows`: every operation on job graphs. `JobQueue`'s
 * `flow`, `getFlow`, `waitForFlow`, `cancelFlow` and `retryFlow` (`@q/job-worker`) call these, and a
 * worker's `ctx.parents` and `ctx.flow.add` call {@link FlowStore.parents} and
 * {@link FlowStore.addNodes}.
 */
export class FlowStore {
  readonly #ctx: JobStoreContext;
  readonly #waitFor: (uuid: string, opts?: WaitForOptions) => Promise<Job>;

  /** @internal Made by `JobStore`, with its context and its `waitFor`. */
  constructor(ctx: JobStoreContext, waitFor: (uuid: string, opts?: WaitForOptions) => Promise<Job>) {
    this.#ctx = ctx;
    this.#waitFor = waitFor;
  }

  /**
   * Inserts a job graph (a flow) atomically: the flow, one job per node and the edges between
   * them. A node without parents is `queued` at once (its queue notified at commit); the others
   * are `waiting`, and each is queued in the transaction that records the success of its last
   * parent (or dead-lettered or cancelled by a parent's failure, per the edge's
   * {@link FlowFailurePolicy}): see migration 0014 and docs/design/jobs.md. Returns the flow's id
   * and each node's job by its ref. With an `idempotencyKey` held by an existing flow, that flow
   * is returned (`created: false`) and nothing is written; of concurrent calls with one key,
   * exactly one inserts.
   *
   * Rejected with `INVALID_ARGUMENT` naming the node, before any statement: no nodes or more than
   * {@link MAX_FLOW_NODES}, a ref given twice, a parent that is not a node of the flow, a node
   * depending on itself, a cycle, a node with both a `type` and a `request`, and anything
   * `JobStore.enqueue` refuses in a job. A node whose `idempotencyKey` another job holds is
   * `DUPLICATE`, and nothing is written.
   *
   * With `{ client }`, everything is written through the caller's connection, in its
   * transaction, behind a savepoint (as `JobStore.enqueue`): the flow exists iff it commits.
   */
  async insert(input: NewFlow, tx?: InTransaction): Promise<FlowResult> {
    return insertGraph(this.#ctx, input, tx);
  }

  /**
   * The flow `flowId` ({@link FlowStore.insert}'s `flowId`): its name, key and creation time, each node's
   * job by ref (status, result, error and timestamps), its edges with their policies, and when it
   * finished (every node done); `null` for an unknown id. A bad UUID is `INVALID_ARGUMENT`.
   */
  async get(flowId: string): Promise<FlowInfo | null> {
    checkUuid(flowId, 'getFlow: flowId');
    return readFlow(this.#ctx, flowId);
  }

  /**
   * Cancels every live node of the flow: waiting, queued and scheduled nodes (and those waiting
   * for a retry) at once, and running ones by a cancel request their worker is told of (their
   * signal aborts, and they end `cancelled`; a prefetched one never starts). Nodes already
   * finished stay as they are. Returns how many of each; both 0 for an unknown or finished flow.
   */
  async cancel(flowId: string): Promise<FlowCancelled> {
    checkUuid(flowId, 'cancelFlow: flowId');
    const ctx = this.#ctx;
    return ctx.op('cancelFlow', () => cancelFlow(ctx.scope, ctx.pool, flowId, ctx.channel));
  }

  /**
   * Resolves with the flow (as {@link FlowStore.get}) once every node of it has finished
   * (at once if it has): it waits for the flow's live nodes as `JobStore.waitFor` does (one
   * shared LISTEN, polling while it cannot listen), then reads the flow again. Rejects with a
   * `QError` `NOT_FOUND` for an unknown flow, `TIMEOUT` after `timeoutMs` in all, or the signal's
   * reason when `signal` aborts.
   */
  async waitFor(flowId: string, opts: WaitForOptions = {}): Promise<FlowInfo> {
    checkUuid(flowId, 'waitForFlow: flowId');
    const deadline = opts.timeoutMs === undefined ? undefined : Date.now() + opts.timeoutMs;
    for (;;) {
      const flow = await this.get(flowId);
      if (!flow) throw new QError(QErrorCode.NOT_FOUND, `waitForFlow: no flow has the id ${flowId}`);
      if (flow.finishedAt !== null) return flow;
      const timeoutMs = deadline === undefined ? undefined : deadline - Date.now();
      if (timeoutMs !== undefined && timeoutMs <= 0)
        throw new QError(QErrorCode.TIMEOUT, `waitForFlow: the flow did not finish within ${opts.timeoutMs} ms`);
      const live = Object.values(flow.nodes).filter((j) => !FINISHED_STATUSES.includes(j.status));
      await Promise.all(live.map((j) => this.#waitFor(j.uuid, { signal: opts.signal, timeoutMs })));
    }
  }

  /**
   * Runs the flow's failed nodes again, in place (same job ids and uuids, so their edges hold):
   * with `mode: 'failed'`, every node in the dead letter or cancelled; with
   * `'failed-and-downstream'`, also every finished node below one of them (children that ran
   * with a parent's failure under `continue`, or succeeded before). Each starts afresh (attempt
   * 0, no error or result) `waiting` on its parents that are not succeeded, else `queued`; a
   * waiting node that depends on one of them waits for it again. Returns how many nodes were
   * retried (0 for an unknown flow or one without failures). Live nodes are left as they are. A
   * failed inference step is sent again as a new request (new id, same queue, body and tenant;
   * a relative deadline counts afresh, an absolute one is kept), when its parents are done; a
   * `q:request` row with no kept request (written by hand) stays failed with every node below it.
   */
  async retry(flowId: string, opts: { mode: 'failed' | 'failed-and-downstream' } = { mode: 'failed' }): Promise<{ retried: number }> {
    checkUuid(flowId, 'retryFlow: flowId');
    const mode = (opts as { mode?: unknown } | null)?.mode;
    if (mode !== 'failed' && mode !== 'failed-and-downstream') {
      throw invalidArgument('retryFlow: mode must be failed or failed-and-downstream');
    }
    const ctx = this.#ctx;
    const ids = await ctx.op('retryFlow', () =>
      withTransaction(ctx.pool, (c) =>
        needsRequestQueue('retryFlow', () => retryFlow(ctx.scope, c, flowId, mode === 'failed-and-downstream', ctx.channel)),
      ),
    );
    return { retried: ids.length };
  }

  /**
   * Fan-out at run time: the running flow node holding `lease` adds `nodes` to its own flow
   * (`ctx.flow.add` of `@q/job-worker`). A node may depend on the other new nodes and on nodes
   * already in the flow (a succeeded one counts as done; a live one cannot finish before the
   * add commits, so its release sees the new edge); existing nodes do not gain parents. Returns
   * the new nodes' jobs by ref, or `null` when the lease is no longer held (nothing is written:
   * a stale run cannot add). `INVALID_ARGUMENT` as {@link FlowStore.insert} for a bad graph and
   * for a ref the flow already has; `INVALID_STATE` for a job outside flows and for a parent that
   * ended in the dead letter or cancelled. Adds to one flow are made one at a time.
   */
  async addNodes(lease: JobLease, nodes: readonly FlowNode[]): Promise<Record<string, Job> | null> {
    return addNodes(this.#ctx, lease, nodes);
  }

  /**
   * The parents of the flow node whose job id is `jobId`, by their refs, each with its status,
   * result and (unless it succeeded: an earlier attempt's error is not its outcome) last error
   * message, in one read: what `ctx.parents` of `@q/job-worker` returns.
   * Empty for a job outside flows, a root, and parents whose edge the `ignore` policy dropped.
   */
  async parents(jobId: number): Promise<Record<string, FlowParent>> {
    checkJobId(jobId);
    const ctx = this.#ctx;
    const rows = await ctx.op('flowParents', () => getFlowParents(ctx.scope, ctx.pool, jobId));
    const out: Record<string, FlowParent> = {};
    for (const r of rows) {
      if (r.flow_ref === null) continue;
      out[r.flow_ref] = {
        status: r.status,
        result: r.result ?? null,
        error: r.status === 'succeeded' || r.last_error === null ? null : splitErrorText(r.last_error).message,
      };
    }
    return out;
  }

  /**
   * Records `traceparent` (a W3C traceparent) as the span of the flow node's attempt holding
   * `lease`, and returns the spans its parents' attempts recorded, to link to: what a `Worker`
   * with a tracer does as a flow node's attempt starts. Nothing is recorded for a lease no longer
   * held or a job outside flows.
   */
  async recordSpan(lease: JobLease, traceparent: string): Promise<string[]> {
    checkLease(lease);
    if (typeof traceparent !== 'string' || traceparent === '') throw invalidArgument('flows.recordSpan: traceparent must be a non-empty string');
    const ctx = this.#ctx;
    return ctx.op('flowSpan', () => recordFlowSpan(ctx.scope, ctx.pool, lease.id, lease.leaseToken, traceparent));
  }
}

/** {@link FlowStore.insert}: checks the graph, then inserts it in one transaction (its own or the caller's, behind a savepoint). */
async function insertGraph(ctx: JobStoreContext, input: NewFlow, tx?: InTransaction): Promise<FlowResult> {
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
  const inserted = await needsRequestQueue('flow', () => insertFlow(ctx.scope, db, batch, ctx.channel));
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

/**
 * `fn`, with the error of a schema without the request queue's tables (an inference step sent by
 * the trigger of jobs migration 0015 finds no `q_requests`) as `INVALID_STATE`: the transaction
 * rolls back.
 */
async function needsRequestQueue<T>(op: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if ((err as { code?: unknown } | null)?.code === '42P01') {
      throw new QError(
        QErrorCode.INVALID_STATE,
        `${op}: inference steps need the request queue in the job store's schema (RequestStore.open on it installs its tables)`,
        { cause: err },
      );
    }
    throw err;
  }
}

/** The nodes' jobs by their ref. */
function byRef(rows: readonly FlowNodeRow[]): Record<string, Job> {
  const out: Record<string, Job> = {};
  for (const r of rows) if (r.flow_ref !== null) out[r.flow_ref] = toJob(r);
  return out;
}

/**
 * {@link FlowStore.get}: the flow's row, its nodes and its edges, or null for an unknown id. Three
 * reads on the pool: a node finishing between them shows in its job, never as a missing edge
 * (an edge is deleted only by the `ignore` policy).
 */
async function readFlow(ctx: JobStoreContext, flowId: string): Promise<FlowInfo | null> {
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
 * {@link FlowStore.addNodes}: a running node adds nodes to its own flow (see sql/add-flow-nodes.ts),
 * fenced by its lease: `null` when the lease is no longer held, and nothing is written.
 */
async function addNodes(ctx: JobStoreContext, lease: JobLease, nodes: NewFlow['nodes']): Promise<Record<string, Job> | null> {
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
        return byRef(await needsRequestQueue('addFlowNodes', () => addFlowNodes(ctx.scope, c, flowId, batch, externalIds, ctx.channel)));
      }),
    { 'job.count': batch.refs.length },
  );
}
