// JobStore `schema` and `pooler` options, and the q.jobs.backlog gauge.
import type { MeterProvider } from '@opentelemetry/api';
import { createTestSchema, type TestSchema } from '@q/testing';
import { StatementScope, quoteIdent } from '@q/schema/internal';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOBS_BACKLOG_METRIC, JobStore, type JobNotification } from '../src/index.js';
import { ENQUEUE_CHUNK } from '../src/jobs/index.js';
import { COUNT_BACKLOG } from '../src/jobs/sql/count-backlog.js';

let dsnSchema: TestSchema;
let target: string;
let admin: pg.Pool;

beforeAll(async () => {
  dsnSchema = await createTestSchema('jobsdsn');
  target = `${dsnSchema.name}_x`;
  admin = new pg.Pool({ connectionString: dsnSchema.serverDsn, max: 2 });
});
afterAll(async () => {
  await admin?.query(`DROP SCHEMA IF EXISTS "${target}" CASCADE`);
  await admin?.end();
  await dsnSchema?.drop();
});

type Callback = (r: { observe(v: number, a?: Record<string, unknown>): void }) => Promise<void> | void;

/** A meter provider that keeps the observable gauges' callbacks, to collect them by hand. */
function gaugeProvider(): {
  provider: MeterProvider;
  collect(name: string): Promise<Array<{ value: number; attributes: Record<string, unknown> }>>;
} {
  const callbacks = new Map<string, Callback[]>();
  const none = () => ({ add: () => undefined, record: () => undefined });
  const meter = {
    createCounter: none,
    createUpDownCounter: none,
    createHistogram: none,
    createGauge: none,
    createObservableGauge: (name: string) => ({
      addCallback: (cb: Callback) => callbacks.set(name, [...(callbacks.get(name) ?? []), cb]),
      removeCallback: (cb: Callback) =>
        callbacks.set(
          name,
          (callbacks.get(name) ?? []).filter((c) => c !== cb),
        ),
    }),
  };
  return {
    provider: { getMeter: () => meter } as unknown as MeterProvider,
    async collect(name) {
      const out: Array<{ value: number; attributes: Record<string, unknown> }> = [];
      for (const cb of callbacks.get(name) ?? []) await cb({ observe: (value, attributes = {}) => out.push({ value, attributes }) });
      return out;
    },
  };
}

describe('JobStore with schema on a DSN whose search_path is another schema', () => {
  it('creates the schema, keeps every object in it, and works end to end (enqueue, claim, notify, complete, maintain, client enqueue)', async () => {
    const store = await JobStore.open(dsnSchema.dsn, { schema: target, maxConns: 4 });
    try {
      expect(store.schema).toBe(target);
      const where = await admin.query<{ t: boolean; d: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS t, to_regclass($2) IS NOT NULL AS d`, [
        `"${target}".q_jobs`,
        `"${dsnSchema.name}".q_jobs`,
      ]);
      expect(where.rows[0]).toEqual({ t: true, d: false });

      const seen: JobNotification[] = [];
      const listener = store.listen({ onNotification: (n) => seen.push(n) });
      await listener.start();
      const [job] = await store.enqueue([{ queue: 'default', type: 'x', payload: { a: 1 } }]);
      for (let i = 0; i < 50 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(seen).toContainEqual({ kind: 'queued', queue: 'default' });
      expect(await listener.tryLeadership()).toBe(true);

      const [claimed] = await store.claim({ queues: ['default'], workerId: 'w', limit: 5, leaseMs: 30_000, start: true });
      expect(claimed?.uuid).toBe(job!.uuid);
      expect(await store.succeed(claimed!, { ok: true })).toBe(true);
      expect(await store.get(job!.uuid)).toMatchObject({ status: 'succeeded', result: { ok: true } });
      expect((await store.list({ status: 'succeeded' })).jobs).toHaveLength(1);
      // The listener holds the maintenance lock (keyed by the store's schema): the fallback waits.
      expect(await store.maintain()).toBeNull();
      await listener.close();
      expect(await store.maintain()).toMatchObject({ reaped: [], promoted: 0 });

      // A caller's client on the DSN's search_path (which holds no job table) writes the store's schema.
      const app = new pg.Pool({ connectionString: dsnSchema.dsn, max: 1 });
      try {
        const c = await app.connect();
        try {
          await c.query('BEGIN');
          const [inTx] = await store.enqueue([{ queue: 'default', type: 'in-tx' }], { client: c });
          await c.query('COMMIT');
          expect((await store.get(inTx!.uuid))?.type).toBe('in-tx');
        } finally {
          c.release();
        }
      } finally {
        await app.end();
      }
    } finally {
      await store.close();
    }
  });

  it('fromPool with schema and pooler: transaction sends unnamed statements and shares the table', async () => {
    const pool = new pg.Pool({ connectionString: dsnSchema.dsn, max: 2 });
    try {
      const store = await JobStore.fromPool(pool, { schema: target, pooler: 'transaction' });
      const [job] = await store.enqueue([{ queue: 'pooled', type: 'p' }]);
      const [c] = await store.claim({ queues: ['pooled'], workerId: 'w', limit: 1, leaseMs: 30_000 });
      expect(c?.uuid).toBe(job!.uuid);
      // No prepared statement was left on the pool's connections.
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'q_jobs%'`);
      expect(rows[0]!.n).toBe(0);
      await store.close();
    } finally {
      await pool.end();
    }
  });

  it('works in a schema whose name holds quotes (the id sequence is named inside a string literal)', async () => {
    const odd = `${dsnSchema.name}_o'h"x`;
    const store = await JobStore.open(dsnSchema.dsn, { schema: odd, maxConns: 2 });
    try {
      const [alone] = await store.enqueue([{ queue: 'odd', type: 'noop' }]);
      const [keyed] = await store.enqueue([{ queue: 'odd', type: 'noop', idempotencyKey: 'odd-key' }]);
      const batch = await store.enqueue(Array.from({ length: 3 }, () => ({ queue: 'odd', type: 'noop' })));
      const split = await store.enqueue(Array.from({ length: ENQUEUE_CHUNK + 1 }, () => ({ queue: 'odd', type: 'noop' })));
      const ids = [alone!, keyed!, ...batch, ...split].map((j) => j.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
      expect(await store.get(alone!.uuid)).toStrictEqual(alone);
    } finally {
      await store.close();
      await admin.query(`DROP SCHEMA IF EXISTS ${quoteIdent(odd)} CASCADE`);
    }
  });

  it('refuses a bad schema or pooler option with INVALID_ARGUMENT', async () => {
    await expect(JobStore.open(dsnSchema.dsn, { schema: '' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(JobStore.open(dsnSchema.dsn, { pooler: 'session' as 'transaction' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('q.jobs.backlog', () => {
  it('reports jobs per queue and status from one grouped count per collection; none once closed', async () => {
    const g = gaugeProvider();
    const store = await JobStore.open(dsnSchema.dsn, { schema: target, meterProvider: g.provider, maxConns: 2 });
    try {
      await store.pool.query(`TRUNCATE "${target}".q_jobs, "${target}".q_jobs_archive, "${target}".q_jobs_idempotency_keys`);
      await store.enqueue([
        { queue: 'a', type: 't' },
        { queue: 'a', type: 't' },
        { queue: 'b', type: 't' },
        { queue: 'b', type: 't', runAt: new Date(Date.now() + 3_600_000) },
      ]);
      await store.claim({ queues: ['a'], workerId: 'w', limit: 1, leaseMs: 30_000, start: true });
      const points = await g.collect(JOBS_BACKLOG_METRIC);
      const by = Object.fromEntries(points.map((p) => [`${String(p.attributes.queue)}/${String(p.attributes.status)}`, p.value]));
      expect(by).toEqual({ 'a/queued': 1, 'a/running': 1, 'b/queued': 1, 'b/scheduled': 1 });
    } finally {
      await store.close();
    }
    expect(await g.collect(JOBS_BACKLOG_METRIC)).toEqual([]);
  });

  it('reads only live rows and the dead letter through the partial indexes: no sequential scan of the kept history', async () => {
    const store = await JobStore.open(dsnSchema.dsn, { schema: target, maxConns: 2 });
    try {
      await store.pool.query(`TRUNCATE "${target}".q_jobs, "${target}".q_jobs_archive, "${target}".q_jobs_idempotency_keys`);
      await store.pool.query(
        `INSERT INTO "${target}".q_jobs (queue, job_type, status, finished_at) SELECT 'h', 't', 'succeeded', now() FROM generate_series(1, 50000)`,
      );
      await store.enqueue([{ queue: 'a', type: 't' }]);
      await store.pool.query(`ANALYZE "${target}".q_jobs, "${target}".q_jobs_archive`);
      const { rows } = await store.pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${new StatementScope(target).sql(COUNT_BACKLOG.text)}`);
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).not.toMatch(/Seq Scan/);
      expect(await store.backlog()).toEqual([{ queue: 'a', status: 'queued', count: 1 }]);
    } finally {
      await store.close();
    }
  });
});
