// How both stores come by their pool (src/store-pool.ts): a pool `open` opened is ended when the
// store cannot be readied on it, and `fromPool` refuses what is not a pool, for both stores alike.
import { createTestSchema, type TestSchema } from '@q/testing';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobStore, RequestStore } from '../src/index.js';
import { checkPool, openStorePool } from '../src/store-pool.js';

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('storepool');
});
afterAll(async () => {
  await schema?.drop();
});

describe('openStorePool', () => {
  it('ends the pool when readying the store on it fails, and rethrows as mapped', async () => {
    let opened: pg.Pool | undefined;
    const failure = openStorePool(
      schema.dsn,
      {},
      { applicationName: 'q-store-pool-test' },
      async (pool) => {
        opened = pool;
        await pool.query('SELECT 1');
        throw new Error('bind failed');
      },
      (err) => new Error(`mapped: ${(err as Error).message}`),
    );
    await expect(failure).rejects.toThrow('mapped: bind failed');
    expect(opened?.ended).toBe(true);
  });

  it('hands the pool over when readying succeeds', async () => {
    const pool = await openStorePool(schema.dsn, { maxConns: 2 }, { applicationName: 'q-store-pool-test' }, async (p) => p);
    try {
      const { rows } = await pool.query<{ name: string }>('SELECT current_setting($1) AS name', ['application_name']);
      expect(rows[0]?.name).toBe('q-store-pool-test');
      expect(pool.options.max).toBe(2);
    } finally {
      await pool.end();
    }
  });
});

describe('fromPool of either store', () => {
  it.each([
    ['RequestStore.fromPool', (p: unknown) => RequestStore.fromPool(p as pg.Pool)],
    ['JobStore.fromPool', (p: unknown) => JobStore.fromPool(p as pg.Pool)],
  ])('%s refuses what is not a pg.Pool', async (op, fromPool) => {
    for (const notAPool of [null, {}, { query: () => undefined }]) {
      await expect(fromPool(notAPool)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: `${op}: pool must be a pg.Pool` });
    }
  });

  it('checkPool accepts anything with query and connect', () => {
    expect(() => checkPool('op', { query: () => undefined, connect: () => undefined })).not.toThrow();
  });
});
