// RequestStore.fromPool and RequestStore.enqueue(requests, { client }) in the caller's transaction, on real Postgres.
import { inTransaction, useFromPool, useSchemaPerTest } from '@q/testing';
import { drizzle } from 'drizzle-orm/node-postgres';
import { pgTable, serial, text } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { RequestStore, drizzleClient } from '../src/index.js';
import { req } from './requests/helpers.js';

let app: pg.Pool;
let store: RequestStore;
const notes = pgTable('notes', { id: serial('id').primaryKey(), body: text('body').notNull() });

useFromPool(RequestStore, { prefix: 'reqtx', max: 10, truncate: ['q_requests', 'notes'] }, async (t) => {
  ({ app, store } = t);
  await app.query('CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL)');
});

const stored = async () => (await app.query<{ id: string }>('SELECT id FROM q_requests ORDER BY id')).rows.map((r) => r.id);
const noteCount = async () => (await app.query<{ n: number }>('SELECT count(*)::int AS n FROM notes')).rows[0]!.n;

/** Runs `fn` in a transaction on one of the app's connections; COMMIT unless `end` is ROLLBACK. */
const inTx = <T>(fn: (c: pg.PoolClient) => Promise<T>, end: 'COMMIT' | 'ROLLBACK' = 'COMMIT'): Promise<T> => inTransaction(app, fn, end);

// fromPool tests get a schema of their own (and a 2-connection pool on it), gone after the test.
const { fresh } = useSchemaPerTest('reqfp', 2);

describe('RequestStore.fromPool', () => {
  it('migrates through the app pool; close() leaves the pool open', async () => {
    const { pool } = await fresh();
    const s = await RequestStore.fromPool(pool);
    expect(s.pool).toBe(pool);
    await s.enqueue([req('a')]);
    await s.close();
    await expect(s.enqueue([req('b')])).rejects.toMatchObject({ code: 'CLOSED' });
    expect(pool.ending).toBe(false);
    expect((await pool.query('SELECT count(*)::int AS n FROM q_requests')).rows[0].n).toBe(1);
    await (await RequestStore.fromPool(pool, { migrate: false })).close();
    expect(pool.ending).toBe(false);
  });

  it('refuses what is not a pool', async () => {
    await expect(RequestStore.fromPool(null as unknown as pg.Pool)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('enqueue(requests, { client })', () => {
  it('committed: the requests exist after the commit and dispatch; rolled back: nothing left', async () => {
    await inTx((c) => store.enqueue([req('r1'), req('r2')], { client: c }), 'ROLLBACK');
    expect(await stored()).toEqual([]);
    await inTx(async (c) => {
      await store.enqueue([req('r1'), req('r2')], { client: c });
      expect(await stored()).toEqual([]); // not visible to other sessions before the commit
    });
    expect(await stored()).toEqual(['r1', 'r2']);
    await store.ensurePartitions('q');
    const now = await store.now();
    await store.acquirePartitions('q', 'owner', now, 30_000, 64);
    const got = await store.dispatch('q', 'owner', now, 10);
    expect(got.map((r) => r.id).sort()).toEqual(['r1', 'r2']);
  });

  it('a DUPLICATE rolls back only q’s savepoint: the caller’s transaction still commits', async () => {
    const existing = req('dup');
    await store.enqueue([existing]);
    await inTx(async (c) => {
      await c.query(`INSERT INTO notes (body) VALUES ('kept')`);
      await expect(store.enqueue([req('fresh-1'), { ...existing }], { client: c })).rejects.toMatchObject({ code: 'DUPLICATE' });
      await store.enqueue([req('fresh-2')], { client: c });
    });
    expect(await stored()).toEqual(['dup', 'fresh-2']);
    expect(await noteCount()).toBe(1);
  });

  it('outside a transaction: INVALID_ARGUMENT, nothing written', async () => {
    const c = await app.connect();
    try {
      await expect(store.enqueue([req('x')], { client: c })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      c.release();
    }
    expect(await stored()).toEqual([]);
  });

  it('Drizzle: db.transaction with an app row, committed together or not at all', async () => {
    const db = drizzle(app);
    await db.transaction(async (tx) => {
      await tx.insert(notes).values({ body: 'order 1' });
      await store.enqueue([req('d1')], { client: drizzleClient(tx) });
    });
    await expect(
      db.transaction(async (tx) => {
        await tx.insert(notes).values({ body: 'order 2' });
        await store.enqueue([req('d2')], { client: drizzleClient(tx) });
        tx.rollback();
      }),
    ).rejects.toThrow();
    expect(await stored()).toEqual(['d1']);
    expect(await noteCount()).toBe(1);
  });
});
