import { randomBytes } from 'node:crypto';
import { DEFAULT_MAX_CONNS, openPool } from '@q/schema';
import { DEFAULT_IDLE_TIMEOUT_MS } from '@q/schema/internal';
import { createTestSchema, type TestSchema } from '@q/testing';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobQueue } from '../src/index.js';
import { waitFor } from './helpers.js';

// The connection footprint of a worker: bounded under load whatever its concurrency, and idle
// connections given back after the idle timeout.

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('jqconn');
});
afterAll(() => schema.drop());

async function backends(app: string): Promise<number> {
  const { rows } = await schema.pool().query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [app]);
  return rows[0]!.n;
}

describe('connection footprint', () => {
  it('pools default to 10 connections that close after 30 s idle', async () => {
    const pool = await openPool(schema.dsn);
    try {
      const o = (pool as unknown as { options: pg.PoolConfig }).options;
      expect([DEFAULT_MAX_CONNS, DEFAULT_IDLE_TIMEOUT_MS]).toEqual([10, 30_000]);
      expect([o.max, o.idleTimeoutMillis]).toEqual([10, 30_000]);
    } finally {
      await pool.end();
    }
  });

  it('a worker at concurrency 20 holds at most maxConns + its listener under load, and at most 2 once idle past the idle timeout', async () => {
    const app = `q-conn-${randomBytes(4).toString('hex')}`;
    const queue = await JobQueue.open(schema.dsn, { applicationName: app, idleTimeoutMillis: 1_000 });
    try {
      let done = 0;
      queue.work(
        't',
        async () => {
          await new Promise((r) => setTimeout(r, 10));
          done++;
        },
        { concurrency: 20 },
      );
      await queue.enqueueMany(Array.from({ length: 400 }, () => ({ type: 't' })));
      // Inspection calls alongside the worker (a dashboard): they must share the capped pool.
      await Promise.all(Array.from({ length: 30 }, () => queue.list({ limit: 100 })));
      let peak = 0;
      await waitFor(
        async () => {
          peak = Math.max(peak, await backends(app));
          return done >= 400;
        },
        60_000,
        20,
      );
      expect(peak).toBeLessThanOrEqual(DEFAULT_MAX_CONNS + 1);
      // Idle: the pool's connections close after the timeout; the LISTEN connection stays.
      peak = Math.max(peak, await backends(app));
      expect(peak).toBeGreaterThan(3);
      // Idle: connections unused for the timeout close. What stays is the LISTEN connection and
      // the one connection the poll and maintenance timers keep busy.
      await waitFor(async () => (await backends(app)) <= 2, 10_000, 100);
      await new Promise((r) => setTimeout(r, 2_000));
      expect(await backends(app)).toBeLessThanOrEqual(2);
    } finally {
      await queue.close();
    }
    await waitFor(async () => (await backends(app)) === 0, 10_000, 50); // close() gives every connection back
  });
});
