// Flows (#41, migration 0014): a job graph inserted in one call, its children released in the
// transaction that records their last parent's success, and the failure policies of its edges —
// on real Postgres, with completions racing from several stores.
import { QErrorCode, isQError } from '@q/schema';
import { useJobStore, withClient, type TestSchema } from '@q/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { JobStore, type FlowJobNode, type FlowNode, type LeasedJob, type NewFlow } from '../src/index.js';

let schema: TestSchema;
let store: JobStore;
let sql: pg.Pool;
const LEASE = 60_000;

useJobStore(
  JobStore,
  {
    prefix: 'jobflows',
    maxConns: 12,
    truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys', 'q_job_edges', 'q_flows', 'q_flow_spans'],
  },
  (t) => {
    ({ schema, store } = t);
    sql = schema.pool();
  },
);

const claimOf = (s: JobStore, queue: string, limit = 100): Promise<LeasedJob[]> =>
  s.claim({ queues: [queue], workerId: 'w', limit, leaseMs: LEASE, start: true });
const succeed = (s: JobStore, js: readonly LeasedJob[], result: (j: LeasedJob) => unknown = (j) => ({ from: j.type })) =>
  s.complete(js.map((j) => ({ id: j.id, leaseToken: j.leaseToken, status: 'succeeded' as const, result: result(j) })));
const counts = async (): Promise<{ flows: number; jobs: number; edges: number }> =>
  (
    await sql.query<{ flows: number; jobs: number; edges: number }>(
      `SELECT (SELECT count(*)::int FROM q_flows) AS flows, (SELECT count(*)::int FROM q_jobs_all) AS jobs,
              (SELECT count(*)::int FROM q_job_edges) AS edges`,
    )
  ).rows[0]!;
const statusOf = async (ref: string): Promise<{ status: string; parents_left: number | null; last_error: string | null }> =>
  (
    await sql.query<{ status: string; parents_left: number | null; last_error: string | null }>(
      'SELECT status::text, parents_left, last_error FROM q_jobs_all WHERE flow_ref = $1',
      [ref],
    )
  ).rows[0]!;
const statuses = async (): Promise<Record<string, string>> =>
  Object.fromEntries(
    (await sql.query<{ r: string; s: string }>('SELECT flow_ref AS r, status::text AS s FROM q_jobs_all ORDER BY id')).rows.map((r) => [
      r.r,
      r.s,
    ]),
  );

const DIAMOND: NewFlow = {
  name: 'diamond',
  nodes: [
    { ref: 'a', type: 'fetch', queue: 'fa', payload: { url: 'x' } },
    { ref: 'b', type: 'left', queue: 'fb', dependsOn: ['a'] },
    { ref: 'c', type: 'right', queue: 'fb', dependsOn: [{ ref: 'a', onFailure: 'continue' }] },
    { ref: 'd', type: 'join', queue: 'fd', dependsOn: ['b', { ref: 'c', onFailure: 'ignore' }], priority: 3, maxAttempts: 2 },
  ],
};

async function expectInvalid(p: Promise<unknown>, message: RegExp): Promise<void> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(isQError(err) && err.code === QErrorCode.INVALID_ARGUMENT, String(err)).toBe(true);
  expect((err as Error).message).toMatch(message);
}

describe('JobStore.flows.insert', () => {
  it('inserts a graph in one call: roots queued, the other nodes waiting on their parents, edges with their policies', async () => {
    const { flowId, created, jobs } = await store.flows.insert(DIAMOND);
    expect(created).toBe(true);
    expect(flowId).toMatch(/^[0-9a-f-]{36}$/);
    expect(Object.keys(jobs).sort()).toEqual(['a', 'b', 'c', 'd']);
    expect(jobs.a).toMatchObject({ status: 'queued', type: 'fetch', queue: 'fa', payload: { url: 'x' } });
    expect(jobs.d).toMatchObject({ status: 'waiting', type: 'join', queue: 'fd', priority: 3, maxAttempts: 2 });
    expect(await store.get(jobs.b!.uuid)).toMatchObject({ status: 'waiting' });
    const { rows: nodes } = await sql.query<{ flow_ref: string; flow_id: string; parents_left: number | null }>(
      'SELECT flow_ref, flow_id, parents_left FROM q_jobs ORDER BY id',
    );
    expect(nodes).toEqual([
      { flow_ref: 'a', flow_id: flowId, parents_left: null },
      { flow_ref: 'b', flow_id: flowId, parents_left: 1 },
      { flow_ref: 'c', flow_id: flowId, parents_left: 1 },
      { flow_ref: 'd', flow_id: flowId, parents_left: 2 },
    ]);
    const { rows: edges } = await sql.query<{ p: string; c: string; on_failure: string }>(
      `SELECT p.flow_ref AS p, c.flow_ref AS c, e.on_failure FROM q_job_edges e
         JOIN q_jobs p ON p.id = e.parent_id JOIN q_jobs c ON c.id = e.child_id ORDER BY 1, 2`,
    );
    expect(edges).toEqual([
      { p: 'a', c: 'b', on_failure: 'fail' },
      { p: 'a', c: 'c', on_failure: 'continue' },
      { p: 'b', c: 'd', on_failure: 'fail' },
      { p: 'c', c: 'd', on_failure: 'ignore' },
    ]);
    // Only the root is claimable.
    for (const q of ['fb', 'fd']) expect(await claimOf(store, q)).toEqual([]);
    expect((await claimOf(store, 'fa')).map((j) => j.uuid)).toEqual([jobs.a!.uuid]);
  });

  it('writes nothing when the caller rolls its transaction back, and everything when it commits', async () => {
    const client = new pg.Client({ connectionString: schema.dsn });
    await client.connect();
    try {
      await client.query('BEGIN');
      const { jobs } = await store.flows.insert(DIAMOND, { client });
      expect(Object.keys(jobs)).toHaveLength(4);
      await client.query('ROLLBACK');
      expect(await counts()).toEqual({ flows: 0, jobs: 0, edges: 0 });
      await client.query('BEGIN');
      await store.flows.insert(DIAMOND, { client });
      expect(await counts()).toEqual({ flows: 0, jobs: 0, edges: 0 });
      await client.query('COMMIT');
      expect(await counts()).toEqual({ flows: 1, jobs: 4, edges: 4 });
    } finally {
      await client.end();
    }
  });

  it('returns the existing flow for its idempotency key: of concurrent inserts exactly one creates', async () => {
    const keyed = { ...DIAMOND, idempotencyKey: 'order-17' };
    // One insert holds the key uncommitted while the others wait on it.
    await withClient(schema.dsn, async (client) => {
      await client.query('BEGIN');
      const first = await store.flows.insert(keyed, { client });
      const racing = Array.from({ length: 5 }, () => store.flows.insert(keyed));
      await new Promise((r) => setTimeout(r, 200));
      await client.query('COMMIT');
      const others = await Promise.all(racing);
      for (const o of others) {
        expect(o.created).toBe(false);
        expect(o.flowId).toBe(first.flowId);
        expect(Object.fromEntries(Object.entries(o.jobs).map(([r, j]) => [r, j.uuid]))).toEqual(
          Object.fromEntries(Object.entries(first.jobs).map(([r, j]) => [r, j.uuid])),
        );
      }
    });
    const all = await Promise.all(Array.from({ length: 6 }, () => store.flows.insert({ ...DIAMOND, idempotencyKey: 'order-18' })));
    expect(all.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(all.map((r) => r.flowId)).size).toBe(1);
    expect(await counts()).toEqual({ flows: 2, jobs: 8, edges: 8 });
  });

  it('refuses a bad graph with INVALID_ARGUMENT naming the node, writing nothing', async () => {
    const n = (ref: string, dependsOn?: FlowJobNode['dependsOn']): FlowNode => ({ ref, type: 't', dependsOn });
    await expectInvalid(
      store.flows.insert({ nodes: [n('a', ['c']), n('b', ['a']), n('c', ['b'])] }),
      /^flow: nodes must not form a cycle, node "[abc]" is on one$/,
    );
    await expectInvalid(store.flows.insert({ nodes: [n('x'), n('a', ['a'])] }), /^flow: node "a" must not depend on itself$/);
    await expectInvalid(store.flows.insert({ nodes: [n('a'), n('a')] }), /^flow: node refs must be unique, "a" is given twice$/);
    await expectInvalid(
      store.flows.insert({ nodes: [n('a'), n('b', ['zz'])] }),
      /^flow: node "b" must depend on nodes of the flow, "zz" is not one$/,
    );
    await expectInvalid(store.flows.insert({ nodes: [n('a'), n('b', ['a', 'a'])] }), /^flow: node "b" must not depend on "a" twice$/);
    await expectInvalid(
      store.flows.insert({ nodes: [n('a'), n('b', [{ ref: 'a', onFailure: 'explode' as 'fail' }])] }),
      /^flow: node "b" onFailure must be one of fail, continue, ignore, cancel$/,
    );
    await expectInvalid(
      store.flows.insert({ nodes: [{ ref: 'a', type: 't', request: { queue: 'llm', payload: {} } } as unknown as FlowNode] }),
      /^flow: node "a" must have either a type or a request, not both$/,
    );
    await expectInvalid(store.flows.insert({ nodes: [{ ref: 'a', type: '' }] }), /^flow: node "a": type must be a non-empty string$/);
    await expectInvalid(store.flows.insert({ nodes: [] }), /^flow: nodes must be a non-empty array$/);
    const many = Array.from({ length: 100_001 }, (_, i) => n(`n${i}`));
    await expectInvalid(store.flows.insert({ nodes: many }), /^flow: nodes must be at most 100000, got 100001$/);
    expect(await counts()).toEqual({ flows: 0, jobs: 0, edges: 0 });
  });

  it('fails with DUPLICATE naming the node whose idempotency key another job holds, writing nothing', async () => {
    await store.enqueue([{ queue: 'fb', type: 'left', idempotencyKey: 'k' }]);
    const err = await store.flows
      .insert({
        nodes: [
          { ref: 'a', type: 'fetch', queue: 'fa' },
          { ref: 'b', type: 'left', queue: 'fb', idempotencyKey: 'k', dependsOn: ['a'] },
        ],
      })
      .catch((e: unknown) => e);
    expect(isQError(err) && err.code === QErrorCode.DUPLICATE, String(err)).toBe(true);
    expect((err as Error).message).toMatch(/node "b"/);
    expect(await counts()).toEqual({ flows: 0, jobs: 1, edges: 0 });
  });
});

describe('release in the completing transaction', () => {
  it('queues a child in the statement that records its last parent success, through complete and completeAndClaim', async () => {
    const { jobs } = await store.flows.insert(DIAMOND);
    const [a] = await claimOf(store, 'fa');
    await succeed(store, [a!]);
    expect(await statuses()).toEqual({ a: 'succeeded', b: 'queued', c: 'queued', d: 'waiting' });
    const bc = await claimOf(store, 'fb');
    expect(bc.map((j) => j.type).sort()).toEqual(['left', 'right']);
    const b = bc.find((j) => j.type === 'left')!;
    const c = bc.find((j) => j.type === 'right')!;
    await succeed(store, [b]);
    expect(await statusOf('d')).toEqual({ status: 'waiting', parents_left: 1, last_error: null });
    expect(await claimOf(store, 'fd')).toEqual([]);
    // The last parent's outcome rides on a claim of the child's queue: the claim reads the
    // statement's snapshot, so the child comes with the next claim.
    const round = await store.completeAndClaim([{ id: c.id, leaseToken: c.leaseToken, status: 'succeeded', result: 1 }], {
      queues: ['fd'],
      workerId: 'w',
      limit: 5,
      leaseMs: LEASE,
      start: true,
    });
    expect(round.jobs).toEqual([]);
    expect(await statusOf('d')).toEqual({ status: 'queued', parents_left: 0, last_error: null });
    expect((await claimOf(store, 'fd')).map((j) => j.uuid)).toEqual([jobs.d!.uuid]);
  });

  it('wakes the child queue listeners at the commit that releases it', async () => {
    await store.flows.insert({
      nodes: [
        { ref: 'a', type: 'p', queue: 'fa' },
        { ref: 'b', type: 'c', queue: 'fwake', dependsOn: ['a'] },
      ],
    });
    const heard: string[] = [];
    await withClient(schema.dsn, async (client) => {
      client.on('notification', (n) => heard.push(n.payload ?? ''));
      await client.query(`LISTEN "${store.channel}"`);
      const [a] = await claimOf(store, 'fa');
      await succeed(store, [a!]);
      await new Promise((r) => setTimeout(r, 200));
    });
    expect(heard).toContain('q:fwake');
  });

  it('releases a fan-in child of 1,000 parents exactly once, never before the last success commits', async () => {
    const N = 1_000;
    const nodes: FlowNode[] = Array.from({ length: N }, (_, i) => ({ ref: `p${i}`, type: 'part', queue: 'fanp' }));
    nodes.push({ ref: 'sum', type: 'sum', queue: 'fanc', dependsOn: nodes.map((n) => n.ref) });
    const { jobs } = await store.flows.insert({ nodes });
    const stores = await Promise.all(Array.from({ length: 4 }, () => JobStore.open(schema.dsn, { maxConns: 3, migrate: false })));
    try {
      const held = await Promise.all(stores.map((s) => claimOf(s, 'fanp', N / 4)));
      expect(held.flat()).toHaveLength(N);
      // A watcher claims the child's queue as fast as it can while the parents complete; each
      // time it gets something, every parent must already be visible as succeeded.
      let done = false;
      const seen: Array<{ uuid: string; parentsDone: number }> = [];
      const watcher = (async () => {
        while (!done) {
          const got = await claimOf(store, 'fanc');
          if (got.length > 0) {
            const { rows } = await sql.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM q_jobs_archive WHERE flow_ref LIKE 'p%' AND status = 'succeeded'",
            );
            for (const j of got) seen.push({ uuid: j.uuid, parentsDone: rows[0]!.n });
          }
        }
      })();
      // Each store completes its parents in batches of 25, two batches in flight per store.
      await Promise.all(
        stores.map(async (s, k) => {
          const mine = held[k]!;
          for (let i = 0; i < mine.length; i += 50) {
            await Promise.all([succeed(s, mine.slice(i, i + 25)), succeed(s, mine.slice(i + 25, i + 50))]);
          }
        }),
      );
      const deadline = Date.now() + 10_000;
      while (seen.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 200));
      done = true;
      await watcher;
      expect(seen).toEqual([{ uuid: jobs.sum!.uuid, parentsDone: N }]);
      expect(await statusOf('sum')).toEqual({ status: 'running', parents_left: 0, last_error: null });
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });
});

describe('release per statement (migration 0015)', () => {
  // Archives the given live jobs as succeeded in one INSERT, in the order given: what the
  // completion statement does, with the row order chosen by the test.
  const ARCHIVE_IN_ORDER = `WITH gone AS (DELETE FROM q_jobs WHERE id = ANY($1::int8[]) RETURNING *)
    INSERT INTO q_jobs_archive
    SELECT (jsonb_populate_record(NULL::q_jobs, to_jsonb(g) || '{"status": "succeeded", "lease_token": null}'::jsonb)).*
    FROM gone g ORDER BY array_position($1::int8[], g.id)`;

  it('writes each child once per statement with the count of its parents that statement finished', async () => {
    const nodes: FlowNode[] = Array.from({ length: 6 }, (_, i) => ({ ref: `p${i}`, type: 'part', queue: 'aggp' }));
    nodes.push({ ref: 'j', type: 'join', queue: 'aggc', dependsOn: nodes.map((n) => n.ref) });
    await store.flows.insert({ nodes });
    const held = await claimOf(store, 'aggp');
    // Every write of the join's row is logged, by a trigger of this test.
    await sql.query(`CREATE TABLE agg_log (parents_left int);
      CREATE FUNCTION agg_log_write() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO agg_log VALUES (NEW.parents_left); RETURN NEW; END $$;
      CREATE TRIGGER agg_log_write BEFORE UPDATE ON q_jobs FOR EACH ROW WHEN (OLD.flow_ref = 'j') EXECUTE FUNCTION agg_log_write()`);
    try {
      await succeed(store, held.slice(0, 4));
      // One statement finished four parents: one write of the join, counting the four.
      expect(await statusOf('j')).toEqual({ status: 'waiting', parents_left: 2, last_error: null });
      expect((await sql.query<{ parents_left: number }>('SELECT parents_left FROM agg_log')).rows).toEqual([{ parents_left: 2 }]);
    } finally {
      await sql.query('DROP TRIGGER agg_log_write ON q_jobs; DROP FUNCTION agg_log_write(); DROP TABLE agg_log');
    }
    await succeed(store, held.slice(4));
    expect(await statusOf('j')).toEqual({ status: 'queued', parents_left: 0, last_error: null });
  });

  it('applies a failure before the successes of the same statement: the child is doomed, not released', async () => {
    await store.flows.insert({
      nodes: [
        { ref: 'ok', type: 'p', queue: 'mixp' },
        { ref: 'bad', type: 'p', queue: 'mixp' },
        { ref: 'soft', type: 'p', queue: 'mixp' },
        { ref: 'child', type: 'c', queue: 'mixc', dependsOn: ['ok', 'bad'] },
        { ref: 'tolerant', type: 'c', queue: 'mixc', dependsOn: ['ok', { ref: 'soft', onFailure: 'continue' }] },
      ],
    });
    const held = await claimOf(store, 'mixp');
    const ids = Object.fromEntries(
      (await sql.query<{ r: string; id: string }>("SELECT flow_ref AS r, id::text FROM q_jobs WHERE queue = 'mixp'")).rows.map((r) => [
        r.r,
        r.id,
      ]),
    );
    const lease = (ref: string) => held.find((j) => String(j.id) === ids[ref])!;
    await store.complete([
      { id: lease('ok').id, leaseToken: lease('ok').leaseToken, status: 'succeeded', result: 1 },
      { id: lease('bad').id, leaseToken: lease('bad').leaseToken, status: 'dead_letter', error: 'no' },
      { id: lease('soft').id, leaseToken: lease('soft').leaseToken, status: 'dead_letter', error: 'no' },
    ]);
    expect(await statusOf('child')).toMatchObject({ status: 'dead_letter', last_error: 'flow: parent bad ended dead_letter' });
    expect(await statusOf('tolerant')).toEqual({ status: 'queued', parents_left: 0, last_error: null });
  });

  /** Waits until every backend of `pids` waits on a lock. */
  const waitForLocks = async (pids: readonly number[]): Promise<void> => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const { rows } = await sql.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1::int[]) AND wait_event_type = 'Lock'",
        [pids],
      );
      if (rows[0]!.n === pids.length) return;
      if (Date.now() > deadline) throw new Error(`backends ${pids.join(', ')} never all waited on a lock`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  it('locks the children of one statement in id order: two statements finishing parents of two children in opposite orders do not deadlock', async () => {
    await store.flows.insert({
      nodes: [
        { ref: 'p1', type: 'p', queue: 'dlp' },
        { ref: 'p2', type: 'p', queue: 'dlp' },
        { ref: 'p3', type: 'p', queue: 'dlp' },
        { ref: 'p4', type: 'p', queue: 'dlp' },
        { ref: 'c1', type: 'c', queue: 'dlc', dependsOn: ['p1', 'p4'] },
        { ref: 'c2', type: 'c', queue: 'dlc', dependsOn: ['p2', 'p3'] },
      ],
    });
    const id = Object.fromEntries(
      (await sql.query<{ r: string; id: string }>('SELECT flow_ref AS r, id::text FROM q_jobs')).rows.map((r) => [r.r, r.id]),
    );
    // lo/hi: the child with the lower/higher id, and a parent of each for either statement.
    const [lo, hi] = Number(id.c1) < Number(id.c2) ? (['c1', 'c2'] as const) : (['c2', 'c1'] as const);
    const parentsOf = { c1: ['p1', 'p4'], c2: ['p2', 'p3'] } as const;
    const first = [id[parentsOf[lo][0]]!, id[parentsOf[hi][0]]!]; // archives lo's parent, then hi's
    const second = [id[parentsOf[hi][1]]!, id[parentsOf[lo][1]]!]; // archives hi's parent, then lo's
    await withClient(schema.dsn, async (locker) => {
      await withClient(schema.dsn, async (a) => {
        await withClient(schema.dsn, async (b) => {
          // The locker holds the lower child. A statement locking its rows' children in its own row
          // order: the first waits for it; the second takes the higher child, then waits for the
          // lower behind the first, which then wants the higher (a deadlock, 40P01). In id order
          // both wait for the lower child and hold nothing meanwhile.
          await locker.query('BEGIN');
          await locker.query('SELECT id FROM q_jobs WHERE id = $1::int8 FOR UPDATE', [id[lo]]);
          const pids = await Promise.all([a, b].map(async (c) => (await c.query<{ p: number }>('SELECT pg_backend_pid() AS p')).rows[0]!.p));
          const settle = (p: Promise<unknown>) =>
            p.then(
              () => 'ok',
              (e: { code?: string }) => e.code ?? 'error',
            );
          const runs = [settle(a.query(ARCHIVE_IN_ORDER, [first]))];
          await waitForLocks(pids.slice(0, 1));
          runs.push(settle(b.query(ARCHIVE_IN_ORDER, [second])));
          await waitForLocks(pids);
          await locker.query('COMMIT');
          expect(await Promise.all(runs)).toEqual(['ok', 'ok']);
        });
      });
    });
    expect(await statusOf('c1')).toEqual({ status: 'queued', parents_left: 0, last_error: null });
    expect(await statusOf('c2')).toEqual({ status: 'queued', parents_left: 0, last_error: null });
  });
});

describe('flows.recordSpan (migration 0015)', () => {
  const TP = (n: number) => `00-${'a'.repeat(32)}-${String(n).padStart(16, '0')}-01`;

  it("records a node's span under its lease and returns its parents' spans; a stale lease or a job outside flows records nothing; purge takes it", async () => {
    await store.flows.insert({
      nodes: [
        { ref: 'a', type: 'p', queue: 'spa' },
        { ref: 'b', type: 'p', queue: 'spa' },
        { ref: 'c', type: 'c', queue: 'spc', dependsOn: ['a', 'b'] },
      ],
    });
    const held = await claimOf(store, 'spa');
    const [a, b] = [held.find((j) => j.flow?.ref === 'a')!, held.find((j) => j.flow?.ref === 'b')!];
    expect(await store.flows.recordSpan(a, TP(1))).toEqual([]);
    // A stale run (its token no longer held) records nothing.
    expect(await store.flows.recordSpan({ id: b.id, leaseToken: '00000000-0000-4000-8000-000000000000' }, TP(9))).toEqual([]);
    expect(await store.flows.recordSpan(b, TP(2))).toEqual([]);
    await succeed(store, held);
    const [c] = await claimOf(store, 'spc');
    expect(c!.flow).toEqual({ id: expect.any(String), ref: 'c', released: true });
    expect((await store.flows.recordSpan(c!, TP(3))).sort()).toEqual([TP(1), TP(2)]);
    // A job outside flows: nothing recorded.
    await store.enqueue([{ queue: 'spx', type: 'plain' }]);
    const [plain] = await claimOf(store, 'spx');
    expect(plain!.flow).toBeUndefined();
    expect(await store.flows.recordSpan(plain!, TP(4))).toEqual([]);
    const spans = async () => (await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM q_flow_spans')).rows[0]!.n;
    expect(await spans()).toBe(3);
    await succeed(store, [c!, plain!]);
    await store.purgeFinished(0);
    expect(await spans()).toBe(0);
  });
});

describe('failure policies', () => {
  // a's children, one per policy; b's and e's children show the cascade.
  const POLICIES: NewFlow = {
    nodes: [
      { ref: 'a', type: 'root', queue: 'fa' },
      { ref: 'z', type: 'other', queue: 'fz' },
      { ref: 'b', type: 'child', queue: 'fc', dependsOn: [{ ref: 'a', onFailure: 'fail' }] },
      { ref: 'c', type: 'child', queue: 'fc', dependsOn: [{ ref: 'a', onFailure: 'continue' }] },
      { ref: 'd', type: 'child', queue: 'fc', dependsOn: [{ ref: 'a', onFailure: 'ignore' }, 'z'] },
      { ref: 'e', type: 'child', queue: 'fc', dependsOn: [{ ref: 'a', onFailure: 'cancel' }] },
      { ref: 'b1', type: 'grandchild', queue: 'fc', dependsOn: ['b'] },
      { ref: 'b2', type: 'grandchild', queue: 'fc', dependsOn: [{ ref: 'b', onFailure: 'continue' }] },
      { ref: 'e1', type: 'grandchild', queue: 'fc', dependsOn: [{ ref: 'e', onFailure: 'continue' }] },
    ],
  };
  const edgesFrom = async (ref: string): Promise<string[]> =>
    (
      await sql.query<{ c: string }>(
        `SELECT c.flow_ref AS c FROM q_job_edges e JOIN q_jobs_all p ON p.id = e.parent_id JOIN q_jobs_all c ON c.id = e.child_id
          WHERE p.flow_ref = $1 ORDER BY 1`,
        [ref],
      )
    ).rows.map((r) => r.c);

  for (const [how, end] of [
    ['is dead-lettered by its worker', 'dead_letter'],
    ['is cancelled while it runs', 'cancelled'],
  ] as const) {
    it(`applies each policy when a parent ${how}, in the same transaction`, async () => {
      await store.flows.insert(POLICIES);
      const [a] = await claimOf(store, 'fa');
      if (end === 'dead_letter') {
        await store.complete([{ id: a!.id, leaseToken: a!.leaseToken, status: 'dead_letter', error: 'boom' }]);
      } else {
        expect(await store.cancel(a!.uuid)).toBe('cancel_requested');
        await succeed(store, [a!]); // a requested cancel wins over the outcome
      }
      expect(await statuses()).toEqual({
        a: end,
        z: 'queued',
        b: 'dead_letter', // fail
        c: 'queued', // continue
        d: 'waiting', // ignore: the edge is gone, d waits for z alone
        e: 'cancelled', // cancel
        b1: 'dead_letter', // fail, cascaded from b
        b2: 'queued', // continue from b
        e1: 'cancelled', // a descendant of a cancelled node, whatever its policy
      });
      expect((await statusOf('b')).last_error).toBe(`flow: parent a ended ${end}`);
      expect((await statusOf('b1')).last_error).toBe('flow: parent b ended dead_letter');
      expect(await statusOf('d')).toMatchObject({ parents_left: 1 });
      expect(await edgesFrom('a')).toEqual(['b', 'c', 'e']);
      const [z] = await claimOf(store, 'fz');
      await succeed(store, [z!]);
      expect(await statusOf('d')).toMatchObject({ status: 'queued', parents_left: 0 });
    });
  }

  it('applies the policies when the reaper dead-letters a crashed parent, and when a waiting node is cancelled', async () => {
    await store.flows.insert({
      nodes: [
        { ref: 'a', type: 'root', queue: 'fa' },
        { ref: 'b', type: 'child', queue: 'fc', dependsOn: ['a'] },
        { ref: 'c', type: 'child', queue: 'fc', dependsOn: [{ ref: 'a', onFailure: 'continue' }] },
        { ref: 'd', type: 'grandchild', queue: 'fc', dependsOn: [{ ref: 'c', onFailure: 'cancel' }] },
        { ref: 'e', type: 'grandchild', queue: 'fc', dependsOn: [{ ref: 'd', onFailure: 'continue' }] },
      ],
    });
    await claimOf(store, 'fa');
    await sql.query("UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE flow_ref = 'a'");
    expect((await store.reapExpired(0)).map((r) => r.status)).toEqual(['dead_letter']);
    expect(await statuses()).toEqual({ a: 'dead_letter', b: 'dead_letter', c: 'queued', d: 'waiting', e: 'waiting' });
    // Cancelling a waiting node cancels it at once, and its children follow their policies.
    const d = (await sql.query<{ uuid: string }>("SELECT uuid FROM q_jobs WHERE flow_ref = 'd'")).rows[0]!.uuid;
    expect(await store.cancel(d)).toBe('cancelled');
    expect(await statuses()).toMatchObject({ d: 'cancelled', e: 'queued' });
  });

  it('dead-letters a chain of 1,000 nodes behind a failed root in one transaction', async () => {
    const nodes: FlowNode[] = Array.from({ length: 1_000 }, (_, i) => ({
      ref: `n${i}`,
      type: 'hop',
      queue: i === 0 ? 'fa' : 'fc',
      dependsOn: i === 0 ? [] : [`n${i - 1}`],
    }));
    await store.flows.insert({ nodes });
    const [root] = await claimOf(store, 'fa');
    await store.complete([{ id: root!.id, leaseToken: root!.leaseToken, status: 'dead_letter', error: 'boom' }]);
    const { rows } = await sql.query<{ status: string; n: number }>('SELECT status::text, count(*)::int AS n FROM q_jobs_all GROUP BY 1');
    expect(rows).toEqual([{ status: 'dead_letter', n: 1_000 }]);
    expect((await statusOf('n999')).last_error).toBe('flow: parent n998 ended dead_letter');
  });
});

describe('getFlow and list({ flowId })', () => {
  it('reads a flow: its nodes by ref with their statuses, its edges, and when it finished', async () => {
    const other = await store.flows.insert(DIAMOND);
    const { flowId, jobs } = await store.flows.insert({ ...DIAMOND, name: 'read me', idempotencyKey: 'read-me' });
    const before = await store.flows.get(flowId);
    expect(before).toMatchObject({ id: flowId, name: 'read me', idempotencyKey: 'read-me', finishedAt: null });
    expect(before!.createdAt).toBeInstanceOf(Date);
    expect(Object.fromEntries(Object.entries(before!.nodes).map(([r, j]) => [r, [j.uuid, j.status]]))).toEqual({
      a: [jobs.a!.uuid, 'queued'],
      b: [jobs.b!.uuid, 'waiting'],
      c: [jobs.c!.uuid, 'waiting'],
      d: [jobs.d!.uuid, 'waiting'],
    });
    expect(before!.edges).toEqual([
      { parent: 'a', child: 'b', onFailure: 'fail' },
      { parent: 'a', child: 'c', onFailure: 'continue' },
      { parent: 'b', child: 'd', onFailure: 'fail' },
      { parent: 'c', child: 'd', onFailure: 'ignore' },
    ]);
    // Run it to the end: a, then b and c, then d (each claim takes the other flow's node too).
    for (const q of ['fa', 'fb', 'fd']) await succeed(store, await claimOf(store, q));
    const after = await store.flows.get(flowId);
    expect(Object.values(after!.nodes).map((j) => j.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    expect(after!.nodes.d!.result).toEqual({ from: 'join' });
    expect(after!.finishedAt!.getTime()).toBe(Math.max(...Object.values(after!.nodes).map((j) => j.finishedAt!.getTime())));
    expect(await store.flows.get('00000000-0000-4000-8000-000000000000')).toBeNull();
    await expectInvalid(store.flows.get('nope'), /^getFlow: flowId must be a UUID string$/);

    // list({ flowId }): only that flow's nodes, live or archived, newest first, paged.
    const page1 = await store.list({ flowId, limit: 3 });
    expect(page1.jobs.map((j) => j.uuid)).toEqual([jobs.d!.uuid, jobs.c!.uuid, jobs.b!.uuid]);
    const page2 = await store.list({ flowId, limit: 3, cursor: page1.nextCursor! });
    expect(page2).toEqual({ jobs: [expect.objectContaining({ uuid: jobs.a!.uuid })], nextCursor: null });
    expect((await store.list({ flowId: other.flowId, type: 'join' })).jobs.map((j) => j.uuid)).toEqual([other.jobs.d!.uuid]);
    await expectInvalid(store.list({ flowId: 'x' }), /^list: flowId must be a UUID string$/);
  });
});

describe('purgeFinished and flows', () => {
  it('keeps a finished parent while a child of it waits, and purges a finished flow with its edges and its row', async () => {
    const { flowId, jobs } = await store.flows.insert({
      idempotencyKey: 'purge-me',
      nodes: [
        { ref: 'a', type: 'p', queue: 'fa' },
        { ref: 'z', type: 'p', queue: 'fz' },
        { ref: 'b', type: 'c', queue: 'fb', dependsOn: ['a', 'z'] },
      ],
    });
    await succeed(store, await claimOf(store, 'fa'));
    expect(await store.purgeFinished(0)).toBe(0); // a is b's parent, and b waits
    await succeed(store, await claimOf(store, 'fz'));
    const [b] = await claimOf(store, 'fb');
    expect(await store.flows.parents(b!.id)).toEqual({
      a: { status: 'succeeded', result: { from: 'p' }, error: null },
      z: { status: 'succeeded', result: { from: 'p' }, error: null },
    });
    await succeed(store, [b!]);
    expect(await store.purgeFinished(0)).toBe(3);
    expect(await counts()).toEqual({ flows: 0, jobs: 0, edges: 0 });
    expect(await store.flows.get(flowId)).toBeNull();
    expect(await store.get(jobs.a!.uuid)).toBeNull();
    // The key is free again.
    expect((await store.flows.insert({ idempotencyKey: 'purge-me', nodes: [{ ref: 'a', type: 'p', queue: 'fa' }] })).created).toBe(true);
  });
});

describe('node ids', () => {
  it('numbers the nodes parents first, whatever order they are listed in', async () => {
    const { jobs } = await store.flows.insert({
      nodes: [
        { ref: 'd', type: 't', dependsOn: ['b', 'c'] },
        { ref: 'c', type: 't', dependsOn: ['a'] },
        { ref: 'b', type: 't', dependsOn: ['a'] },
        { ref: 'a', type: 't' },
        { ref: 'x', type: 't' },
      ],
    });
    const id = (r: string) => jobs[r]!.id;
    expect(id('a')).toBeLessThan(id('b'));
    expect(id('a')).toBeLessThan(id('c'));
    expect(Math.max(id('b'), id('c'))).toBeLessThan(id('d'));
    const { rows } = await sql.query<{ p: string; c: string }>(
      `SELECT p.flow_ref AS p, c.flow_ref AS c FROM q_job_edges e JOIN q_jobs p ON p.id = e.parent_id JOIN q_jobs c ON c.id = e.child_id ORDER BY 1, 2`,
    );
    expect(rows).toEqual([
      { p: 'a', c: 'b' },
      { p: 'a', c: 'c' },
      { p: 'b', c: 'd' },
      { p: 'c', c: 'd' },
    ]);
    expect(await statusOf('d')).toMatchObject({ status: 'waiting', parents_left: 2 });
    expect(await statusOf('x')).toMatchObject({ status: 'queued' });
  });
});

describe('retryFlow', () => {
  const deadLetter = (s: JobStore, j: LeasedJob) => s.complete([{ id: j.id, leaseToken: j.leaseToken, status: 'dead_letter', error: 'boom' }]);

  it("mode 'failed' runs the failed nodes again in place, waiting on their parents; succeeded nodes stay", async () => {
    const { flowId, jobs } = await store.flows.insert({
      nodes: [
        { ref: 'a', type: 'root', queue: 'fa', idempotencyKey: 'root-key' },
        { ref: 'b', type: 'child', queue: 'fb', dependsOn: ['a'] },
        { ref: 'c', type: 'child', queue: 'fb', dependsOn: [{ ref: 'a', onFailure: 'continue' }] },
        { ref: 'd', type: 'join', queue: 'fd', dependsOn: ['b', { ref: 'c', onFailure: 'continue' }] },
      ],
    });
    await deadLetter(store, (await claimOf(store, 'fa'))[0]!);
    await succeed(store, await claimOf(store, 'fb')); // c runs with a's failure
    expect(await statuses()).toEqual({ a: 'dead_letter', b: 'dead_letter', c: 'succeeded', d: 'dead_letter' });

    expect(await store.flows.retry(flowId, { mode: 'failed' })).toEqual({ retried: 3 });
    expect(await statuses()).toEqual({ a: 'queued', b: 'waiting', c: 'succeeded', d: 'waiting' });
    expect(await statusOf('d')).toMatchObject({ parents_left: 1, last_error: null });
    const a = await store.get(jobs.a!.uuid);
    expect(a).toMatchObject({ id: jobs.a!.id, status: 'queued', attempt: 0, lastError: null, finishedAt: null });
    // Its idempotency key is still held by it.
    expect((await store.enqueue([{ queue: 'fa', type: 'root', idempotencyKey: 'root-key' }]))[0]!.uuid).toBe(jobs.a!.uuid);
    // It runs to the end.
    for (const q of ['fa', 'fb', 'fd']) await succeed(store, await claimOf(store, q));
    expect(Object.values(await statuses())).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    expect(await store.flows.retry(flowId, { mode: 'failed' })).toEqual({ retried: 0 });
  });

  it("mode 'failed-and-downstream' also runs again what finished below a failure", async () => {
    const { flowId } = await store.flows.insert({
      nodes: [
        { ref: 'a', type: 'root', queue: 'fa' },
        { ref: 'c', type: 'child', queue: 'fb', dependsOn: [{ ref: 'a', onFailure: 'continue' }] },
        { ref: 'w', type: 'other', queue: 'fz' },
        { ref: 'x', type: 'join', queue: 'fd', dependsOn: [{ ref: 'a', onFailure: 'continue' }, 'w'] },
      ],
    });
    await deadLetter(store, (await claimOf(store, 'fa'))[0]!);
    await succeed(store, await claimOf(store, 'fb'));
    expect(await statuses()).toEqual({ a: 'dead_letter', c: 'succeeded', w: 'queued', x: 'waiting' });
    expect(await statusOf('x')).toMatchObject({ parents_left: 1 });
    expect(await store.flows.retry(flowId, { mode: 'failed-and-downstream' })).toEqual({ retried: 2 });
    // c runs again after a; x, still waiting on w, waits for a again too.
    expect(await statuses()).toEqual({ a: 'queued', c: 'waiting', w: 'queued', x: 'waiting' });
    expect(await statusOf('x')).toMatchObject({ parents_left: 2 });
    await expectInvalid(store.flows.retry(flowId, { mode: 'all' as 'failed' }), /^retryFlow: mode must be failed or failed-and-downstream$/);
  });
});

describe('addFlowNodes (fan-out at run time)', () => {
  it('adds nodes to the running node’s flow, depending on new and existing nodes; the fan-in waits for them all', async () => {
    const { flowId } = await store.flows.insert({
      nodes: [
        { ref: 'first', type: 'first', queue: 'fa' },
        { ref: 'split', type: 'split', queue: 'fb', dependsOn: ['first'] },
        { ref: 'slow', type: 'slow', queue: 'fz' },
      ],
    });
    await succeed(store, await claimOf(store, 'fa'));
    const [split] = await claimOf(store, 'fb');
    const added = await store.flows.addNodes(split!, [
      { ref: 'page1', type: 'page', queue: 'fc', payload: { n: 1 } },
      { ref: 'page2', type: 'page', queue: 'fc', payload: { n: 2 }, dependsOn: ['first'] },
      { ref: 'sum', type: 'sum', queue: 'fd', dependsOn: ['page1', 'page2', 'slow', 'split'] },
    ]);
    expect(Object.keys(added!).sort()).toEqual(['page1', 'page2', 'sum']);
    // first succeeded (counts as done); slow and split are live (wait for them).
    expect(await statuses()).toMatchObject({ page1: 'queued', page2: 'queued', sum: 'waiting' });
    expect(await statusOf('sum')).toMatchObject({ parents_left: 4 });
    expect(added!.sum!.status).toBe('waiting');
    expect((await store.flows.get(flowId))!.edges).toContainEqual({ parent: 'slow', child: 'sum', onFailure: 'fail' });
    await succeed(store, [split!]);
    await succeed(store, await claimOf(store, 'fc'));
    expect(await statusOf('sum')).toMatchObject({ status: 'waiting', parents_left: 1 });
    await succeed(store, await claimOf(store, 'fz'));
    expect(await statusOf('sum')).toMatchObject({ status: 'queued', parents_left: 0 });
  });

  it('adds nothing for a stale run, and refuses a ref the flow has, a job outside flows, and a failed parent', async () => {
    await store.flows.insert({
      nodes: [
        { ref: 'a', type: 'a', queue: 'fa' },
        { ref: 'dead', type: 'd', queue: 'fz' },
      ],
    });
    const [dead] = await claimOf(store, 'fz');
    await store.complete([{ id: dead!.id, leaseToken: dead!.leaseToken, status: 'dead_letter', error: 'x' }]);
    const [a] = await claimOf(store, 'fa');
    await expectInvalid(store.flows.addNodes(a!, [{ ref: 'a', type: 'again' }]), /^addFlowNodes: node "a" ref must be new in its flow$/);
    await expectInvalid(
      store.flows.addNodes(a!, [{ ref: 'n', type: 't', dependsOn: ['nope'] }]),
      /node "n" must depend on nodes of the flow, "nope" is not one/,
    );
    const failed = await store.flows.addNodes(a!, [{ ref: 'n', type: 't', dependsOn: ['dead'] }]).catch((e: unknown) => e);
    expect(isQError(failed) && failed.code === QErrorCode.INVALID_STATE, String(failed)).toBe(true);
    // The lease lapses and the job is claimed again: the old run is fenced.
    await sql.query("UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE flow_ref = 'a'");
    await store.reapExpired(5);
    await sql.query("UPDATE q_jobs SET status = 'queued' WHERE flow_ref = 'a'");
    const [again] = await claimOf(store, 'fa');
    expect(again!.uuid).toBe(a!.uuid);
    expect(await store.flows.addNodes(a!, [{ ref: 'late', type: 't' }])).toBeNull();
    expect(Object.keys(await statuses())).toEqual(['a', 'dead']);
    expect(Object.keys((await store.flows.addNodes(again!, [{ ref: 'late', type: 't' }]))!)).toEqual(['late']);
    // A job outside flows.
    await store.enqueue([{ queue: 'plain', type: 'p' }]);
    const [plain] = await claimOf(store, 'plain');
    const outside = await store.flows.addNodes(plain!, [{ ref: 'x', type: 't' }]).catch((e: unknown) => e);
    expect(isQError(outside) && outside.code === QErrorCode.INVALID_STATE, String(outside)).toBe(true);
  });
});

describe('jobs outside flows', () => {
  it('are enqueued, claimed and completed without touching the flow tables (held locked meanwhile)', async () => {
    await store.enqueue(Array.from({ length: 50 }, (_, i) => ({ queue: 'plain', type: 'p', payload: { i } })));
    await withClient(schema.dsn, async (locker) => {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE q_job_edges, q_flows IN ACCESS EXCLUSIVE MODE');
      try {
        const work = (async () => {
          const held = await claimOf(store, 'plain', 50);
          await succeed(store, held.slice(0, 20));
          await store.complete(
            held.slice(20, 30).map((j) => ({ id: j.id, leaseToken: j.leaseToken, status: 'dead_letter' as const, error: 'x' })),
          );
          await store.completeAndClaim(
            held.slice(30).map((j) => ({ id: j.id, leaseToken: j.leaseToken, status: 'succeeded' as const })),
            { queues: ['plain'], workerId: 'w', limit: 5, leaseMs: LEASE, start: true },
          );
          return held.length;
        })();
        const outcome = await Promise.race([work, new Promise((r) => setTimeout(() => r('blocked'), 5_000))]);
        expect(outcome).toBe(50);
      } finally {
        await locker.query('ROLLBACK');
      }
    });
    expect((await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM q_jobs_archive WHERE queue = 'plain'")).rows[0]!.n).toBe(50);
  });
});
