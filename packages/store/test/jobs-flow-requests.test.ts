// Inference steps of flows (#41, jobs migration 0015, requests migration 0005): a node
// that is a request on the request queue, sent with its flow, its release, its add or its retry, finished in the transaction that writes
// its result (or by its deadline passing), its children then released or doomed by their edges.
// Real Postgres, the request queue driven by its own store calls (dispatch, ack).
import { QErrorCode, isQError } from '@q/schema';
import { createTestSchema, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FLOW_REQUEST_TYPE, JobStore, RequestStore, type FlowNode, type NewFlow, type Request } from '../src/index.js';
import { partitionOf } from '../src/requests/partition.js';

let schema: TestSchema;
let jobs: JobStore;
let requests: RequestStore;
let sql: pg.Pool;
const OWNER = 'owner-a';
const nowSec = (): number => Math.floor(Date.now() / 1000);

beforeAll(async () => {
  schema = await createTestSchema('jobflowreq');
  // The request queue first: jobs migration 0015 then finds q_results and puts its trigger on it.
  requests = await RequestStore.open(schema.dsn, { maxConns: 4 });
  jobs = await JobStore.open(schema.dsn, { maxConns: 6 });
  sql = schema.pool();
});

afterAll(async () => {
  await jobs?.close();
  await requests?.close();
  await schema?.drop();
});

beforeEach(async () => {
  await sql.query(
    `TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys, q_job_edges, q_flows, q_flow_requests, q_flow_request_specs, q_requests, q_results, q_partitions`,
  );
});

const step = (ref: string, over: Partial<{ queue: string; deadline: number; payload: unknown }> = {}): FlowNode => ({
  ref,
  request: { queue: over.queue ?? 'llm', payload: over.payload ?? { prompt: `say ${ref}` }, deadline: over.deadline ?? nowSec() + 600 },
});

/** Dispatches every pending request of `queue` to {@link OWNER}. */
async function dispatchAll(queue = 'llm'): Promise<Request[]> {
  await requests.ensurePartitions(queue);
  await requests.acquirePartitions(queue, OWNER, new Date(), 600_000, 64);
  return requests.dispatch(queue, OWNER, new Date(), 100);
}

/** The route the request's envelope names (the dispatcher's `internal.result_queue_name`). */
const routeOf = (r: Request): string => (JSON.parse(r.envelope) as { internal: { result_queue_name: string } }).internal.result_queue_name;

/** Acks `r` with a result message as the dispatcher writes it. */
async function answer(r: Request, message: Record<string, unknown>, route = routeOf(r)): Promise<boolean> {
  const [ok] = await requests.ack(OWNER, [
    { id: r.id, token: r.token, attempt: r.attempt, route, payload: JSON.stringify({ id: r.id, ...message }) },
  ]);
  return ok!;
}

const statuses = async (): Promise<Record<string, string>> =>
  Object.fromEntries(
    (await sql.query<{ r: string; s: string }>('SELECT flow_ref AS r, status::text AS s FROM q_jobs_all ORDER BY id')).rows.map((r) => [
      r.r,
      r.s,
    ]),
  );
const count = async (table: string): Promise<number> => (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n;

async function expectInvalid(p: Promise<unknown>, message: RegExp): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isQError(err) && err.code === QErrorCode.INVALID_ARGUMENT, String(err)).toBe(true);
  expect((err as Error).message).toMatch(message);
}

describe('inference steps', () => {
  it('sends the request with the flow; its result finishes the node in the ack, and the child sees the body', async () => {
    const flow: NewFlow = {
      nodes: [
        step('ask', { payload: { messages: [{ role: 'user', content: 'hi' }] } }),
        { ref: 'use', type: 'summarise', queue: 'fq', dependsOn: ['ask'] },
      ],
    };
    const { flowId, jobs: nodes } = await jobs.flows.insert(flow);
    const ask = nodes.ask!;
    expect(ask).toMatchObject({ status: 'waiting', type: FLOW_REQUEST_TYPE, queue: 'llm' });
    const requestId = (ask.payload as { request: { id: string } }).request.id;
    // No worker can claim the step.
    expect(await jobs.claim({ queues: ['llm', 'fq'], workerId: 'w', limit: 10, leaseMs: 60_000 })).toEqual([]);

    const [r, ...more] = await dispatchAll();
    expect(more).toEqual([]);
    expect(r!.id).toBe(requestId);
    expect(JSON.parse(Buffer.from(r!.payload).toString('utf8'))).toEqual({ messages: [{ role: 'user', content: 'hi' }] });
    expect(routeOf(r!)).toBe(`q:flow:${flowId}`);
    expect(JSON.parse(r!.envelope)).toMatchObject({ request_kind: 'plain', data: { id: requestId }, internal: { request_token: r!.token } });

    expect(await answer(r!, { status_code: 200, payload: JSON.stringify({ choices: [{ text: 'hello' }] }) })).toBe(true);
    expect(await statuses()).toEqual({ ask: 'succeeded', use: 'queued' });
    expect(await count('q_results')).toBe(0); // taken by the node, not left on the route
    expect(await count('q_flow_requests')).toBe(0);
    expect(await count('q_requests')).toBe(0);
    const [child] = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 10, leaseMs: 60_000 });
    expect(await jobs.flows.parents(child!.id)).toEqual({ ask: { status: 'succeeded', result: { choices: [{ text: 'hello' }] }, error: null } });
    const info = await jobs.flows.get(flowId);
    expect(info?.nodes.ask).toMatchObject({ status: 'succeeded', payload: { request: { id: requestId, queue: 'llm' } } });
  });

  it('keeps a body that is not JSON as text', async () => {
    await jobs.flows.insert({ nodes: [step('a')] });
    const [r] = await dispatchAll();
    await answer(r!, { status_code: 200, payload: 'plain words' });
    const { rows } = await sql.query<{ result: unknown }>('SELECT result FROM q_jobs_all');
    expect(rows[0]!.result).toBe('plain words');
  });

  it('fails the node on an error result, then applies each edge policy', async () => {
    await jobs.flows.insert({
      nodes: [
        step('ask'),
        { ref: 'strict', type: 't', queue: 'fq', dependsOn: ['ask'] },
        { ref: 'lenient', type: 't', queue: 'fq', dependsOn: [{ ref: 'ask', onFailure: 'continue' }] },
        { ref: 'dropped', type: 't', queue: 'fq', dependsOn: [{ ref: 'ask', onFailure: 'cancel' }] },
      ],
    });
    const [r] = await dispatchAll();
    await answer(r!, {
      payload: JSON.stringify({ error: 'deadline exceeded' }),
      error_code: 'DEADLINE_EXCEEDED',
      error_message: 'deadline exceeded',
    });
    expect(await statuses()).toEqual({ ask: 'dead_letter', strict: 'dead_letter', lenient: 'queued', dropped: 'cancelled' });
    const [lenient] = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 10, leaseMs: 60_000 });
    expect(await jobs.flows.parents(lenient!.id)).toEqual({
      ask: { status: 'dead_letter', result: null, error: 'request: DEADLINE_EXCEEDED (deadline exceeded)' },
    });
  });

  it('fails the node on an HTTP error status and on a result that is not a result message, naming no body', async () => {
    await jobs.flows.insert({ nodes: [step('a'), step('b')] });
    const [r1, r2] = await dispatchAll();
    await answer(r1!, { status_code: 500, payload: 'secret prompt echoed' });
    const [ok] = await requests.ack(OWNER, [{ id: r2!.id, token: r2!.token, attempt: r2!.attempt, route: routeOf(r2!), payload: 'not json' }]);
    expect(ok).toBe(true);
    const { rows } = await sql.query<{ ref: string; status: string; last_error: string }>(
      'SELECT flow_ref AS ref, status::text, last_error FROM q_jobs_all ORDER BY flow_ref',
    );
    expect(rows.every((x) => x.status === 'dead_letter')).toBe(true);
    expect(rows.map((x) => x.last_error).sort()).toEqual(['request: the model answered HTTP 500', 'request: unparsable result']);
    expect(rows.some((x) => x.last_error.includes('secret'))).toBe(false);
  });

  it('fails the node when its deadline passes with no result, and withdraws the request', async () => {
    const deadline = nowSec() + 1;
    await jobs.flows.insert({
      nodes: [step('ask', { deadline }), { ref: 'after', type: 't', queue: 'fq', dependsOn: [{ ref: 'ask', onFailure: 'continue' }] }],
    });
    await jobs.maintain();
    expect(await statuses()).toEqual({ ask: 'waiting', after: 'waiting' });
    while (Date.now() / 1000 <= deadline + 0.05) await new Promise((r) => setTimeout(r, 100));
    await jobs.maintain();
    expect(await statuses()).toEqual({ ask: 'dead_letter', after: 'queued' });
    const { rows } = await sql.query<{ last_error: string }>(`SELECT last_error FROM q_jobs_all WHERE flow_ref = 'ask'`);
    expect(rows[0]!.last_error).toBe('request: the deadline passed with no result');
    expect(await count('q_requests')).toBe(0);
    expect(await count('q_flow_requests')).toBe(0);
  });

  it('cancelFlow withdraws a pending request and flags a dispatched one, whose late result is dropped', async () => {
    const a = await jobs.flows.insert({ nodes: [step('x')] });
    const b = await jobs.flows.insert({ nodes: [step('y', { queue: 'llm2' })] });
    const [ry] = await dispatchAll('llm2');
    await jobs.flows.cancel(a.flowId);
    await jobs.flows.cancel(b.flowId);
    expect(await statuses()).toEqual({ x: 'cancelled', y: 'cancelled' });
    const { rows } = await sql.query<{ queue: string; cancelled: number }>('SELECT queue, cancelled FROM q_requests');
    expect(rows).toEqual([{ queue: 'llm2', cancelled: 1 }]);
    expect(await answer(ry!, { status_code: 200, payload: '{}' })).toBe(true);
    expect(await statuses()).toEqual({ x: 'cancelled', y: 'cancelled' });
    expect(await count('q_results')).toBe(0);
  });

  it('finishes the node whatever route the writer picks (a dispatcher queue may configure its own)', async () => {
    await jobs.flows.insert({ nodes: [step('a'), { ref: 'b', type: 't', queue: 'fq', dependsOn: ['a'] }] });
    const [r] = await dispatchAll();
    await requests.enqueue([{ id: 'plain', token: 't1', queue: 'llm', deadline: nowSec() + 60, envelope: '{}', payload: Buffer.from('x') }]);
    const [plain] = await dispatchAll();
    // One ack batch: the flow's result and another request's, both on the queue's own route.
    expect(
      await requests.ack(OWNER, [
        {
          id: r!.id,
          token: r!.token,
          attempt: r!.attempt,
          route: 'chat-out',
          payload: JSON.stringify({ id: r!.id, status_code: 200, payload: '7' }),
        },
        { id: plain!.id, token: plain!.token, attempt: plain!.attempt, route: 'chat-out', payload: 'answer' },
      ]),
    ).toEqual([true, true]);
    expect(await statuses()).toEqual({ a: 'succeeded', b: 'queued' });
    expect((await requests.popResults('chat-out', nowSec(), 10)).map((x) => x.payload)).toEqual(['answer']);
  });

  it('acks racing cancelFlow and maintenance neither deadlock nor finish a node twice', async () => {
    const flows = await Promise.all(
      Array.from({ length: 40 }, (_, k) =>
        jobs.flows.insert({ nodes: [step(`ask${k}`), { ref: `use${k}`, type: 't', queue: 'fq', dependsOn: [`ask${k}`] }] }),
      ),
    );
    const dispatched = await dispatchAll();
    expect(dispatched).toHaveLength(40);
    const other = await JobStore.open(schema.dsn, { maxConns: 4, migrate: false });
    try {
      const batches = Array.from({ length: 8 }, (_, b) => dispatched.slice(b * 5, b * 5 + 5));
      const results = await Promise.allSettled([
        ...batches.map((rs) =>
          requests.ack(
            OWNER,
            rs.map((r) => ({
              id: r.id,
              token: r.token,
              attempt: r.attempt,
              route: routeOf(r),
              payload: JSON.stringify({ id: r.id, payload: '1' }),
            })),
          ),
        ),
        ...flows.filter((_, k) => k % 2 === 0).map((f) => other.flows.cancel(f.flowId)),
        jobs.maintain(),
        other.maintain(),
      ]);
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    } finally {
      await other.close();
    }
    const st = await statuses();
    for (let k = 0; k < 40; k++) {
      // A cancelled flow's step ended either way (the ack or the cancel came first); its child is
      // cancelled with the flow. The others' steps succeeded and released their child.
      if (k % 2 === 0) {
        expect(['succeeded', 'cancelled']).toContain(st[`ask${k}`]);
        expect(st[`use${k}`]).toBe('cancelled');
      } else {
        expect([st[`ask${k}`], st[`use${k}`]]).toEqual(['succeeded', 'queued']);
      }
    }
    expect(await count('q_flow_requests')).toBe(0);
    expect(await count('q_requests')).toBe(0);
    expect(await count('q_results')).toBe(0);
    // Each node finished once: one archive row per step and per cancelled child.
    expect(await count('q_jobs_archive')).toBe(60);
  });

  it('leaves results of other routes alone', async () => {
    await requests.enqueue([{ id: 'plain', token: 't1', queue: 'llm', deadline: nowSec() + 60, envelope: '{}', payload: Buffer.from('x') }]);
    const [r] = await dispatchAll();
    await requests.ack(OWNER, [{ id: r!.id, token: r!.token, attempt: r!.attempt, route: 'out', payload: 'answer' }]);
    expect((await requests.popResults('out', nowSec(), 10)).map((x) => x.payload)).toEqual(['answer']);
  });

  it('inserts nothing when the caller transaction rolls back', async () => {
    const client = await sql.connect();
    try {
      await client.query('BEGIN');
      await jobs.flows.insert({ nodes: [step('a')] }, { client });
      expect((await client.query<{ n: number }>('SELECT count(*)::int AS n FROM q_requests')).rows[0]!.n).toBe(1);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await count('q_requests')).toBe(0);
    expect(await count('q_flows')).toBe(0);
  });

  it('refuses bad inference steps with INVALID_ARGUMENT naming the node, writing nothing', async () => {
    const bad = (node: unknown): Promise<unknown> => jobs.flows.insert({ nodes: [{ ref: 'ok', type: 't' }, node as FlowNode] });
    await expectInvalid(
      bad({ ref: 'a', type: 't', request: step('a').request }),
      /^flow: node "a" must have either a type or a request, not both$/,
    );
    await expectInvalid(bad({ ref: 'a', request: null }), /^flow: node "a" request must be an object/);
    await expectInvalid(bad({ ref: 'a', request: 'x' }), /^flow: node "a" request must be an object/);
    await expectInvalid(
      bad({ ref: 'a', request: { payload: {}, deadline: nowSec() + 60 } }),
      /^flow: node "a" request\.queue must be a non-empty string$/,
    );
    await expectInvalid(bad({ ref: 'a', request: { queue: 'llm', deadline: nowSec() + 60 } }), /^flow: node "a" request\.payload must be given/);
    await expectInvalid(
      bad({ ref: 'a', request: { queue: 'llm', payload: 1n, deadline: nowSec() + 60 } }),
      /^flow: node "a" request\.payload must be storable JSON: /,
    );
    await expectInvalid(
      bad({ ref: 'a', request: { queue: 'llm', payload: {}, deadline: 1.5 } }),
      /^flow: node "a" request\.deadline must be whole Unix seconds$/,
    );
    await expectInvalid(
      bad({ ref: 'a', request: { queue: 'llm', payload: {}, deadline: nowSec() - 10 } }),
      /^flow: node "a" request\.deadline must not be past$/,
    );
    await expectInvalid(
      bad({ ref: 'a', request: { queue: 'llm', payload: {}, deadline: nowSec() + 60, tenant: '' } }),
      /^flow: node "a" request\.tenant must be a non-empty string$/,
    );
    await expectInvalid(
      bad({ ref: 'a', request: { queue: 'llm', payload: {} } }),
      /^flow: node "a" request must have either a deadline or deadlineSeconds$/,
    );
    await expectInvalid(
      bad({ ref: 'a', request: { queue: 'llm', payload: {}, deadline: nowSec() + 60, deadlineSeconds: 60 } }),
      /^flow: node "a" request must have either a deadline or deadlineSeconds$/,
    );
    for (const deadlineSeconds of [0, 1.5, -3, '60', 400 * 24 * 3600]) {
      await expectInvalid(
        bad({ ref: 'a', request: { queue: 'llm', payload: {}, deadlineSeconds } }),
        /^flow: node "a" request\.deadlineSeconds must be whole seconds from 1 to \d+$/,
      );
    }
    await expectInvalid(bad({ ...step('a'), dependsOn: ['nope'] }), /^flow: node "a" must depend on nodes of the flow, "nope" is not one$/);
    await expectInvalid(
      bad({ ...step('a'), queue: 'q' }),
      /^flow: node "a" must have no queue: an inference step takes a ref, a request and dependsOn only$/,
    );
    await expectInvalid(bad({ ...step('a'), payload: {} }), /^flow: node "a" must have no payload: /);
    expect(await count('q_flows')).toBe(0);
    expect(await count('q_jobs_all')).toBe(0);
    expect(await count('q_requests')).toBe(0);
  });

  it('sends an inference step with parents in the transaction that releases it, its deadline counted from the send', async () => {
    const { flowId, jobs: nodes } = await jobs.flows.insert({
      nodes: [
        { ref: 'prep', type: 't', queue: 'fq' },
        { ref: 'ask', request: { queue: 'llm', payload: { prompt: 'secret words' }, deadlineSeconds: 120 }, dependsOn: ['prep'] },
        { ref: 'use', type: 't', queue: 'fq', dependsOn: ['ask'] },
      ],
    });
    expect(nodes.ask).toMatchObject({ status: 'waiting', type: FLOW_REQUEST_TYPE, payload: { request: { queue: 'llm' } } });
    // The body is kept beside the node, never in its job row.
    const { rows: jobRows } = await sql.query<{ p: string }>(`SELECT payload::text AS p FROM q_jobs WHERE flow_ref = 'ask'`);
    expect(jobRows[0]!.p).not.toContain('secret');
    expect(await count('q_flow_request_specs')).toBe(1);
    expect(await count('q_requests')).toBe(0);

    const [prep] = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 10, leaseMs: 60_000, start: true });
    const before = nowSec();
    await jobs.complete([{ id: prep!.id, leaseToken: prep!.leaseToken, status: 'succeeded', result: 1 }]);
    expect(await statuses()).toEqual({ prep: 'succeeded', ask: 'waiting', use: 'waiting' });
    const { rows } = await sql.query<{ id: string; partition_id: number; deadline: string; left: number | null; rid: string }>(
      `SELECT r.id, r.partition_id, r.deadline::text, j.parents_left AS left, j.payload -> 'request' ->> 'id' AS rid
         FROM q_requests r JOIN q_flow_requests l ON l.request_id = r.id JOIN q_jobs j ON j.id = l.job_id`,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.rid).toBe(rows[0]!.id);
    expect(rows[0]!.left).toBeNull();
    expect(rows[0]!.partition_id).toBe(partitionOf(rows[0]!.id));
    expect(Number(rows[0]!.deadline)).toBeGreaterThanOrEqual(before + 120);
    expect(Number(rows[0]!.deadline)).toBeLessThanOrEqual(nowSec() + 121);
    // Never queued: no worker of the request queue's name sees it.
    expect(await jobs.claim({ queues: ['llm'], workerId: 'w', limit: 10, leaseMs: 60_000 })).toEqual([]);

    const [r] = await dispatchAll();
    expect(JSON.parse(Buffer.from(r!.payload).toString('utf8'))).toEqual({ prompt: 'secret words' });
    expect(routeOf(r!)).toBe(`q:flow:${flowId}`);
    expect(JSON.parse(r!.envelope)).toMatchObject({ data: { id: r!.id, deadline: Number(rows[0]!.deadline) } });
    await answer(r!, { status_code: 200, payload: '{"answer":42}' });
    expect(await statuses()).toEqual({ prep: 'succeeded', ask: 'succeeded', use: 'queued' });
    const [use] = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 10, leaseMs: 60_000 });
    expect((await jobs.flows.parents(use!.id)).ask).toEqual({ status: 'succeeded', result: { answer: 42 }, error: null });
  });

  it('sends an inference step whose parent failed under continue, and dooms one under fail without sending it', async () => {
    await jobs.flows.insert({
      nodes: [
        { ref: 'prep', type: 't', queue: 'fq', maxAttempts: 1 },
        {
          ref: 'lenient',
          request: { queue: 'llm', payload: 1, deadlineSeconds: 60, tenant: 'acme' },
          dependsOn: [{ ref: 'prep', onFailure: 'continue' }],
        },
        { ref: 'strict', request: { queue: 'llm', payload: 2, deadline: nowSec() + 60 }, dependsOn: ['prep'] },
      ],
    });
    const [prep] = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 10, leaseMs: 60_000, start: true });
    await jobs.complete([{ id: prep!.id, leaseToken: prep!.leaseToken, status: 'dead_letter', error: 'boom' }]);
    expect(await statuses()).toEqual({ prep: 'dead_letter', lenient: 'waiting', strict: 'dead_letter' });
    const [r, ...more] = await dispatchAll();
    expect(more).toEqual([]);
    expect(Buffer.from(r!.payload).toString('utf8')).toBe('1');
    expect(JSON.parse(r!.envelope)).toMatchObject({ data: { metadata: { userid: 'acme' } } });
  });

  it('lets a running node add an inference step depending on existing nodes and a child of it; a stale lease adds nothing', async () => {
    const { flowId } = await jobs.flows.insert({
      nodes: [
        { ref: 'root', type: 'r', queue: 'fq' },
        { ref: 'side', type: 's', queue: 'sq' },
      ],
    });
    const [root] = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 1, leaseMs: 60_000, start: true });
    // Without parents: sent by the add itself.
    const first = await jobs.flows.addNodes(root!, [{ ref: 'now', request: { queue: 'llm', payload: 'a', deadlineSeconds: 60 } }]);
    expect(first?.now).toMatchObject({ status: 'waiting', type: FLOW_REQUEST_TYPE });
    expect(await count('q_requests')).toBe(1);
    // On the caller and another live node: sent once both are done.
    const added = await jobs.flows.addNodes(root!, [
      { ref: 'ask', request: { queue: 'llm', payload: 'b', deadlineSeconds: 60 }, dependsOn: ['root', 'side'] },
      { ref: 'use', type: 'u', queue: 'fq', dependsOn: ['ask'] },
    ]);
    expect(Object.keys(added ?? {}).sort()).toEqual(['ask', 'use']);
    expect(await count('q_requests')).toBe(1);
    await jobs.complete([{ id: root!.id, leaseToken: root!.leaseToken, status: 'succeeded' }]);
    expect(await count('q_requests')).toBe(1);
    const [side] = await jobs.claim({ queues: ['sq'], workerId: 'w', limit: 1, leaseMs: 60_000, start: true });
    await jobs.complete([{ id: side!.id, leaseToken: side!.leaseToken, status: 'succeeded' }]);
    expect(await count('q_requests')).toBe(2);
    const sent = await dispatchAll();
    const ask = sent.find((x) => Buffer.from(x.payload).toString('utf8') === '"b"');
    expect(routeOf(ask!)).toBe(`q:flow:${flowId}`);
    await answer(ask!, { status_code: 200, payload: '"done"' });
    expect((await statuses()).use).toBe('queued');

    // The lease is gone (root finished): a stale run adds nothing.
    expect(await jobs.flows.addNodes(root!, [{ ref: 'late', request: { queue: 'llm', payload: 'c', deadlineSeconds: 60 } }])).toBeNull();
    expect(await count(`q_jobs_all WHERE flow_ref = 'late'`)).toBe(0);
    expect(await count('q_flow_request_specs')).toBe(2);
  });

  it('retryFlow sends a failed inference step again as a new request, and the nodes below wait for it', async () => {
    const { flowId } = await jobs.flows.insert({
      nodes: [
        { ref: 'ask', request: { queue: 'llm', payload: { p: 1 }, deadlineSeconds: 300 } },
        { ref: 'below', type: 't', queue: 'fq', dependsOn: ['ask'] },
        { ref: 'fixed', request: { queue: 'llm', payload: { p: 2 }, deadline: nowSec() + 900 } },
      ],
    });
    const [r1, r2] = await dispatchAll();
    const [askReq, fixedReq] = Buffer.from(r1!.payload).toString('utf8') === '{"p":1}' ? [r1!, r2!] : [r2!, r1!];
    await answer(askReq, { payload: '{}', error_code: 'INFERENCE_ERROR' });
    await answer(fixedReq, { payload: '{}', error_code: 'INFERENCE_ERROR' });
    expect(await statuses()).toEqual({ ask: 'dead_letter', below: 'dead_letter', fixed: 'dead_letter' });
    expect(await count('q_requests')).toBe(0);

    expect(await jobs.flows.retry(flowId, { mode: 'failed' })).toEqual({ retried: 3 });
    expect(await statuses()).toEqual({ ask: 'waiting', below: 'waiting', fixed: 'waiting' });
    const { rows } = await sql.query<{ id: string; deadline: string; payload: Buffer }>('SELECT id, deadline::text, payload FROM q_requests');
    expect(rows.map((x) => x.id)).not.toContain(askReq.id);
    expect(rows.map((x) => x.id)).not.toContain(fixedReq.id);
    const byBody = new Map(rows.map((x) => [Buffer.from(x.payload).toString('utf8'), x]));
    // A relative deadline counts afresh; an absolute one is kept.
    expect(Number(byBody.get('{"p":1}')!.deadline)).toBeGreaterThanOrEqual(nowSec() + 298);
    expect(byBody.get('{"p":2}')!.deadline).toBe(String(JSON.parse(fixedReq.envelope).data.deadline));
    const again = await dispatchAll();
    const ask2 = again.find((x) => Buffer.from(x.payload).toString('utf8') === '{"p":1}')!;
    // The old request's late result has no link any more: dropped, the node untouched.
    expect(await answer(askReq, { status_code: 200, payload: '"stale"' })).toBe(false);
    await answer(ask2, { status_code: 200, payload: '"fresh"' });
    expect((await statuses()).below).toBe('queued');
    const [below] = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 1, leaseMs: 60_000 });
    expect((await jobs.flows.parents(below!.id)).ask).toMatchObject({ status: 'succeeded', result: 'fresh' });
  });

  it('retryFlow with failed-and-downstream re-sends an inference step below a retried job once its parent succeeds', async () => {
    const { flowId } = await jobs.flows.insert({
      nodes: [
        { ref: 'prep', type: 't', queue: 'fq', maxAttempts: 1 },
        { ref: 'ask', request: { queue: 'llm', payload: 'x', deadlineSeconds: 60 }, dependsOn: [{ ref: 'prep', onFailure: 'continue' }] },
      ],
    });
    const [prep] = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 1, leaseMs: 60_000, start: true });
    await jobs.complete([{ id: prep!.id, leaseToken: prep!.leaseToken, status: 'dead_letter', error: 'boom' }]);
    const [r] = await dispatchAll();
    await answer(r!, { status_code: 200, payload: '"first"' });
    expect(await statuses()).toEqual({ prep: 'dead_letter', ask: 'succeeded' });
    expect(await jobs.flows.retry(flowId, { mode: 'failed-and-downstream' })).toEqual({ retried: 2 });
    expect(await statuses()).toEqual({ prep: 'queued', ask: 'waiting' });
    expect(await count('q_requests')).toBe(0);
    const [prep2] = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 1, leaseMs: 60_000, start: true });
    await jobs.complete([{ id: prep2!.id, leaseToken: prep2!.leaseToken, status: 'succeeded' }]);
    expect(await count('q_requests')).toBe(1);
  });

  it('retryFlow leaves an inference step with nothing kept to send (a q:request row written without one), and the nodes below it', async () => {
    const { flowId } = await jobs.flows.insert({
      nodes: [
        step('ask'),
        { ref: 'below', type: 't', queue: 'fq', dependsOn: ['ask'] },
        { ref: 'other', type: 't', queue: 'fq', maxAttempts: 1 },
      ],
    });
    const [r] = await dispatchAll();
    await answer(r!, { payload: '{}', error_code: 'INFERENCE_ERROR' });
    const [other] = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 10, leaseMs: 60_000 });
    await jobs.complete([{ id: other!.id, leaseToken: other!.leaseToken, status: 'dead_letter', error: 'boom' }]);
    await sql.query('DELETE FROM q_flow_request_specs');
    expect(await jobs.flows.retry(flowId, { mode: 'failed-and-downstream' })).toEqual({ retried: 1 });
    expect(await statuses()).toEqual({ ask: 'dead_letter', below: 'dead_letter', other: 'queued' });
    expect(await count('q_requests')).toBe(0);
  });

  it('leaves a job given the reserved type by hand as it was (nothing to send)', async () => {
    const [job] = await jobs.enqueue([{ queue: 'hand', type: FLOW_REQUEST_TYPE, payload: { send: 'not a spec' } }]);
    expect(job).toMatchObject({ status: 'queued', payload: { send: 'not a spec' } });
    const { flowId } = await jobs.flows.insert({ nodes: [{ ref: 'odd', type: FLOW_REQUEST_TYPE, queue: 'hand' }] });
    expect((await jobs.flows.get(flowId))?.nodes.odd?.status).toBe('queued');
    expect(await count('q_requests')).toBe(0);
    expect(await count('q_flow_request_specs')).toBe(0);
  });

  it('drops the kept request with the node once its archived row is deleted', async () => {
    await jobs.flows.insert({ nodes: [step('a')] });
    const [r] = await dispatchAll();
    await answer(r!, { status_code: 200, payload: '1' });
    expect(await count('q_flow_request_specs')).toBe(1);
    await sql.query('DELETE FROM q_jobs_archive');
    expect(await count('q_flow_request_specs')).toBe(0);
  });

  it('works when the job store is installed before the request queue (requests 0005 adds the trigger)', async () => {
    const s = await createTestSchema('jobflowreq2');
    const j = await JobStore.open(s.dsn, { maxConns: 2 });
    try {
      // Without the request queue's tables, an inference step is refused and nothing is written.
      const err = await j.flows.insert({ nodes: [step('a')] }).catch((e: unknown) => e);
      expect(isQError(err) && err.code === QErrorCode.INVALID_STATE, String(err)).toBe(true);
      const p = s.pool();
      expect((await p.query<{ n: number }>('SELECT count(*)::int AS n FROM q_flows')).rows[0]!.n).toBe(0);

      const r = await RequestStore.open(s.dsn, { maxConns: 2 });
      try {
        await j.flows.insert({ nodes: [step('a'), { ref: 'b', type: 't', queue: 'fq', dependsOn: ['a'] }] });
        await r.ensurePartitions('llm');
        await r.acquirePartitions('llm', OWNER, new Date(), 600_000, 64);
        const [req] = await r.dispatch('llm', OWNER, new Date(), 10);
        await r.ack(OWNER, [
          {
            id: req!.id,
            token: req!.token,
            attempt: req!.attempt,
            route: routeOf(req!),
            payload: JSON.stringify({ id: req!.id, status_code: 200, payload: '"ok"' }),
          },
        ]);
        const { rows } = await p.query<{ r: string; s: string }>('SELECT flow_ref AS r, status::text AS s FROM q_jobs_all ORDER BY id');
        expect(rows).toEqual([
          { r: 'a', s: 'succeeded' },
          { r: 'b', s: 'queued' },
        ]);
        const { rows: triggers } = await p.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_trigger WHERE tgname = 'q_flow_request_result' AND tgrelid = 'q_results'::regclass`,
        );
        expect(triggers[0]!.n).toBe(1);
      } finally {
        await r.close();
      }
    } finally {
      await j.close();
      await s.drop();
    }
  });

  it('has the trigger once when the request queue was installed first', async () => {
    const { rows } = await sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_trigger WHERE tgname = 'q_flow_request_result' AND tgrelid = 'q_results'::regclass`,
    );
    expect(rows[0]!.n).toBe(1);
  });
});
