import { randomBytes } from 'node:crypto';
import { METRIC } from '@q/otel';
import { isQError } from '@q/schema';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestStore, Store, stampOf } from '../src/index.js';
import * as requestsEntry from '../src/requests-entry.js';
import { at, req, waitFor } from './requests/helpers.js';
import { RecordingMeterProvider, RecordingTracerProvider } from './requests/telemetry.js';

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('sopen');
});
afterAll(() => schema.drop());

async function backends(app: string): Promise<Array<{ pid: number; state: string }>> {
  const { rows } = await schema
    .pool()
    .query<{ pid: number; state: string }>('SELECT pid, state FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid', [app]);
  return rows;
}

describe('RequestStore.open', () => {
  it('8 concurrent opens on an empty schema all succeed and create each table once', async () => {
    const fresh = await createTestSchema('sopen8');
    try {
      const stores = await Promise.all(Array.from({ length: 8 }, () => RequestStore.open(fresh.dsn, { maxConns: 2 })));
      const { rows } = await fresh
        .pool()
        .query<{ t: string }>(
          `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1 AND table_name LIKE 'q%' AND table_name <> 'q_schema_migrations' ORDER BY 1`,
          [fresh.name],
        );
      expect(rows.map((r) => r.t)).toEqual([
        'q_batch_file_lines',
        'q_batch_files',
        'q_batch_requests',
        'q_batches',
        'q_dispatchers',
        'q_partitions',
        'q_requests',
        'q_results',
      ]);
      await Promise.all(stores.map((s) => s.ping()));
      await Promise.all(stores.map((s) => s.close()));
    } finally {
      await fresh.drop();
    }
  });

  it('maxConns: 4 caps connections under 16 concurrent statements and reuses the idle ones', async () => {
    const app = `q-cap-${randomBytes(4).toString('hex')}`;
    const store = await RequestStore.open(schema.dsn, { maxConns: 4, applicationName: app });
    try {
      await store.enqueue([req('locked')]);
      // Hold the row so the 16 cancels queue up on it: every pooled connection gets busy.
      const holder = await schema.pool().connect();
      let peak = 0;
      try {
        await holder.query('BEGIN');
        await holder.query(`SELECT 1 FROM q_requests WHERE id = 'locked' FOR UPDATE`);
        const running = Promise.all(Array.from({ length: 16 }, () => store.cancel(['locked'])));
        await waitFor(async () => {
          const now = await backends(app);
          peak = Math.max(peak, now.length);
          return now.filter((b) => b.state === 'active').length === 4;
        });
        await holder.query('COMMIT');
        await running;
      } finally {
        holder.release();
      }
      const first = await backends(app);
      expect(peak).toBe(4);
      expect(first).toHaveLength(4);
      expect(store.pool.totalCount).toBe(4);
      expect(store.pool.idleCount).toBe(4); // kept idle, not closed
      await Promise.all(Array.from({ length: 16 }, () => store.backlog('q', 0, [1])));
      expect((await backends(app)).map((b) => b.pid)).toEqual(first.map((b) => b.pid));
    } finally {
      await store.close();
    }
    await waitFor(async () => (await backends(app)).length === 0);
  });

  it('refuses unsupported and unreachable DSNs without showing the password', async () => {
    const bad = await RequestStore.open('mysql://user:hunter2@localhost/db').catch((e: unknown) => e);
    expect(isQError(bad, 'UNSUPPORTED_DSN')).toBe(true);
    expect(String((bad as Error).message)).not.toContain('hunter2');
    const down = await RequestStore.open('postgres://user:hunter2@127.0.0.1:1/db').catch((e: unknown) => e);
    expect(isQError(down, 'CONNECTION')).toBe(true);
    expect(String((down as Error).message)).not.toContain('hunter2');
  });

  it('migrate: false leaves the schema alone until migrate()', async () => {
    const fresh = await createTestSchema('sopennm');
    try {
      const store = await RequestStore.open(fresh.dsn, { maxConns: 1, migrate: false });
      expect(await store.hasRequests('q').catch((e: unknown) => e)).toBeInstanceOf(Error);
      await store.migrate();
      expect(await store.hasRequests('q')).toBe(false);
      await store.close();
    } finally {
      await fresh.drop();
    }
  });

  it('now() reads the database clock; ping works; calls after close fail with CLOSED', async () => {
    const store = await RequestStore.open(schema.dsn, { maxConns: 1 });
    const { rows } = await schema.pool().query<{ now: Date }>('SELECT clock_timestamp() AS now');
    const now = await store.now();
    expect(Math.abs(now.getTime() - rows[0]!.now.getTime())).toBeLessThan(10_000);
    await store.ping();
    await store.close();
    await store.close();
    const err = await store.hasRequests('q').catch((e: unknown) => e);
    expect(isQError(err, 'CLOSED')).toBe(true);
  });
});

describe('Store, the deprecated name', () => {
  it('is RequestStore itself, from the root entry and from @q/store/requests', () => {
    expect(Store).toBe(RequestStore);
    expect(requestsEntry.Store).toBe(RequestStore);
    expect(requestsEntry.RequestStore).toBe(RequestStore);
  });

  it('Store.open opens a working RequestStore (instanceof either name, usable where the type Store is expected)', async () => {
    const store: Store = await Store.open(schema.dsn, { maxConns: 1 });
    try {
      expect(store).toBeInstanceOf(RequestStore);
      expect(store instanceof Store).toBe(true);
      const typed: RequestStore = store;
      await typed.ping();
      await store.enqueue([req('via-store')]);
      expect(await store.hasRequests('q')).toBe(true);
    } finally {
      await store.close();
    }
  });
});

describe('telemetry', () => {
  it('records q.store.<op> spans with statement spans, and request metrics', async () => {
    const tp = new RecordingTracerProvider();
    const mp = new RecordingMeterProvider();
    const store = await RequestStore.open(schema.dsn, { maxConns: 2, tracerProvider: tp, meterProvider: mp.asProvider() });
    try {
      await store.truncateForTest();
      await store.ensurePartitions('q');
      await store.acquirePartitions('q', 'a', at(1_000), 60_000, 64);
      await store.enqueue([req('m1'), req('m2'), req('m3', { payload: Buffer.from('secret-payload') })]);
      const got = await store.dispatch('q', 'a', at(1_000), 10);
      expect(await store.retry('a', stampOf(got[2]!), 0, '{}')).toBe(true);
      const acks = await store.ack('a', [
        { ...stampOf(got[0]!), route: 'r', payload: 'x' },
        { ...stampOf(got[0]!), route: 'r', payload: 'x' },
        { ...stampOf(got[1]!), route: 'r', payload: 'y' },
      ]);
      expect(acks).toEqual([true, false, true]);
      expect(await store.popResults('r', 0, 10)).toHaveLength(2);
      const names = tp.spans.map((s) => s.name);
      for (const op of ['enqueue', 'dispatch', 'ack', 'retry', 'popResults', 'acquirePartitions']) expect(names).toContain(`q.store.${op}`);
      expect(names.some((n) => n.startsWith('SELECT') || n.startsWith('INSERT'))).toBe(true);
      expect(JSON.stringify(tp.spans)).not.toContain('secret-payload');
      expect(mp.total(METRIC.requestsEnqueued)).toBe(3);
      expect(mp.total(METRIC.requestsDispatched)).toBe(3);
      expect(mp.total(METRIC.requestsAcked)).toBe(2);
      expect(mp.total(METRIC.requestsFenced)).toBe(1);
      expect(mp.total(METRIC.requestsRetried)).toBe(1);
      expect(mp.total(METRIC.resultsPopped)).toBe(2);
    } finally {
      await store.close();
    }
  });
});
