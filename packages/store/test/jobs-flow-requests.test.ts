// Inference steps of flows (#41, jobs migration 0015, requests migration 0005): a node that is a
// request on the request queue, inserted with its flow, finished in the transaction that writes
// its result (or by its deadline passing), its children then released or doomed by their edges.
// Real Postgres, the request queue driven by its own store calls (dispatch, ack).
import { QErrorCode, isQError } from '@q/schema';
import { createTestSchema, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FLOW_REQUEST_TYPE, JobStore, RequestStore, type FlowNode, type NewFlow, type Request } from '../src/index.js';

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
    `TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys, q_job_edges, q_flows, q_flow_requests, q_requests, q_results, q_partitions`,
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

  it('retryFlow leaves a failed inference step and the nodes below it as they are, and retries the others', async () => {
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
    expect(await statuses()).toEqual({ ask: 'dead_letter', below: 'dead_letter', other: 'dead_letter' });
    expect(await jobs.flows.retry(flowId, { mode: 'failed-and-downstream' })).toEqual({ retried: 1 });
    expect(await statuses()).toEqual({ ask: 'dead_letter', below: 'dead_letter', other: 'queued' });
    expect(await count('q_requests')).toBe(0);
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
      bad({ ...step('a'), dependsOn: ['ok'] }),
      /^flow: node "a" must have no dependsOn: an inference step takes a ref and a request only$/,
    );
    await expectInvalid(bad({ ...step('a'), payload: {} }), /^flow: node "a" must have no payload: /);
    expect(await count('q_flows')).toBe(0);
    expect(await count('q_jobs_all')).toBe(0);
    expect(await count('q_requests')).toBe(0);
  });

  it('refuses an inference step added at run time', async () => {
    await jobs.flows.insert({ nodes: [{ ref: 'root', type: 'r', queue: 'fq' }] });
    const [root] = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 1, leaseMs: 60_000, start: true });
    await expectInvalid(
      jobs.flows.addNodes(root!, [step('late')]),
      /^flow: node "late" must be a job: a running node cannot add an inference step$/,
    );
  });
});

describe('inference steps and install order', () => {
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
