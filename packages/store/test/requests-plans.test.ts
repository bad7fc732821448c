import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { stampOf, type Request } from '../src/index.js';
import { ALL, at, openTestStore, req, type TestStore } from './requests/helpers.js';
import { capturePlans, leadingColumns, rowsRead, type PlanNode } from './requests/plans.js';

// A queue table is often analysed while empty, then refilled: its statistics then claim it is
// empty. Every hot statement must still walk an index from its keys and stop at its batch size.
let t: TestStore;
let plans: { take(): PlanNode[] };
let leading: Map<string, string>;
const NOW = at(10_000);
const ROWS = 20_000;
const QUEUE_TABLES = ['q_requests', 'q_results'];

beforeAll(async () => {
  t = await openTestStore({ maxConns: 1, applicationName: `q-plans-${randomBytes(3).toString('hex')}` });
  const admin = t.schema.pool();
  // Keep autovacuum from fixing the statistics behind the test's back.
  await admin.query('ALTER TABLE q_requests SET (autovacuum_enabled = off)');
  await admin.query('ALTER TABLE q_results SET (autovacuum_enabled = off)');
  await t.store.ensurePartitions('q');
  await t.store.acquirePartitions('q', 'a', NOW, 3_600_000, 64);
  // Fill, empty (without VACUUM, so the pages stay), analyse: statistics now say "empty".
  await t.store.enqueue(Array.from({ length: 1000 }, (_, i) => req(`old-${i}`, { queue: 'gone' })));
  await admin.query(`INSERT INTO q_results (route, id, request_token, payload, created_at)
                     SELECT 'gone', 'o' || g, 't', 'x', 0 FROM generate_series(1, 1000) g`);
  await admin.query('DELETE FROM q_requests');
  await admin.query('DELETE FROM q_results');
  await admin.query('ANALYZE q_requests');
  await admin.query('ANALYZE q_results');
  const { rows } = await admin.query<{ n: number }>(`SELECT reltuples::int AS n FROM pg_class WHERE oid = 'q_requests'::regclass`);
  expect(rows[0]!.n).toBe(0);
  // Refill.
  await t.store.enqueue(Array.from({ length: ROWS }, (_, i) => req(`r-${i}`, { deadline: 20_000 + ((i * 7919) % ROWS) })));
  await admin.query(
    `INSERT INTO q_results (route, id, request_token, payload, created_at)
                     SELECT 'bulk', 'r' || g, 't', 'x', 0 FROM generate_series(1, $1::int) g`,
    [ROWS],
  );
  leading = await leadingColumns(admin, QUEUE_TABLES);
  // The store has one connection: auto_explain on it sees every statement the store sends.
  const client = await t.store.pool.connect();
  try {
    plans = await capturePlans(client);
  } finally {
    client.release();
  }
}, 120_000);
afterAll(() => t.close());

/** Runs `fn`, then checks every plan it produced: no seq scan, at most 4 × batch queue rows read. */
async function expectIndexDriven<T>(what: string, batch: number, fn: () => Promise<T>): Promise<T> {
  plans.take();
  const out = await fn();
  const got = plans.take();
  const read = rowsRead(got, QUEUE_TABLES, leading);
  expect(got.length, `${what}: plans captured`).toBeGreaterThan(0);
  expect(read.seqScans, `${what}: ${read.scans.join(', ')}`).toBe(0);
  expect(read.unkeyed, `${what}: index scans not driven by the leading column`).toEqual([]);
  if (process.env.Q_PLANS) console.log(what, read.rows, read.scans.join(', '));
  expect(read.rows, `${what}: ${read.scans.join(', ')}`).toBeLessThanOrEqual(4 * batch);
  return out;
}

it(`hot statements stay index-driven on a refilled table whose statistics say empty (${ROWS} rows)`, async () => {
  const batch = await expectIndexDriven('dispatch', 256, () => t.store.dispatch('q', 'a', NOW, 256));
  expect(batch).toHaveLength(256);
  const inFlight = await expectIndexDriven('inFlight', 256, () => t.store.inFlight('q', 'a'));
  expect(inFlight).toHaveLength(256);
  const keys = batch.map((r) => ({ id: r.id, token: r.token }));
  expect(await expectIndexDriven('cancelledKeys', 256, () => t.store.cancelledKeys(keys))).toEqual([]);
  const acked = batch.slice(0, 128);
  const acks = await expectIndexDriven('ack', 128, () =>
    t.store.ack(
      'a',
      acked.map((r: Request) => ({ ...stampOf(r), route: 'out', payload: 'ok' })),
    ),
  );
  expect(acks.every(Boolean)).toBe(true);
  await expectIndexDriven('undispatch', 64, () => t.store.undispatch('a', batch.slice(128, 192).map(stampOf)));
  expect(await expectIndexDriven('retry', 1, () => t.store.retry('a', stampOf(batch[200]!), 0, '{}'))).toBe(true);
  // Release and re-take every partition: what is still in flight (63 rows) is now stale.
  await t.store.releasePartitions('q', 'a', ALL);
  await t.store.acquirePartitions('q', 'a', NOW, 3_600_000, 64);
  await expectIndexDriven('resetStale', 63, () => t.store.resetStale('q', 'a'));
  expect(await t.store.inFlight('q', 'a')).toEqual([]);
  const popped = await expectIndexDriven('popResults', 256, () => t.store.popResults('bulk', 10_000, 256));
  expect(popped).toHaveLength(256);
  expect(await t.store.backlog('q', 0, [])).toEqual({ depth: ROWS - 128, cancelled: 0, expiring: [] });
});
