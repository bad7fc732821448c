// JobStore.fromPool and enqueue through the caller's transaction ({ client }), on real Postgres.
import { isQError } from '@q/schema';
import { inTransaction, useFromPool, useSchemaPerTest, withClient, type TestSchema } from '@q/testing';
import { drizzle } from 'drizzle-orm/node-postgres';
import { integer, pgTable, serial, text } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ENQUEUE_CHUNK, JobStore, drizzleClient, type JobNotification, type TransactionClient } from '../src/index.js';

let schema: TestSchema;
let app: pg.Pool; // the application's pool
let store: JobStore;

const orders = pgTable('orders', { id: serial('id').primaryKey(), item: text('item').notNull(), qty: integer('qty').notNull() });

useFromPool(JobStore, { prefix: 'jobstx', max: 12, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys', 'orders'] }, async (t) => {
  ({ schema, app, store } = t);
  await app.query('CREATE TABLE orders (id serial PRIMARY KEY, item text NOT NULL, qty integer NOT NULL CHECK (qty > 0))');
});

const count = async (sql = 'SELECT count(*)::int AS n FROM q_jobs_all') => (await app.query<{ n: number }>(sql)).rows[0]!.n;

/** Runs `fn` in a transaction on one of the app's connections; COMMIT unless `end` is ROLLBACK. */
const inTx = <T>(fn: (c: pg.PoolClient) => Promise<T>, end: 'COMMIT' | 'ROLLBACK' = 'COMMIT'): Promise<T> => inTransaction(app, fn, end);

/** Collects the store's notifications on a dedicated LISTEN connection. */
async function listening(): Promise<{ got: JobNotification[]; close(): Promise<void> }> {
  const got: JobNotification[] = [];
  const l = store.listen({ onNotification: (n) => got.push(n) });
  await l.start();
  return { got, close: () => l.close() };
}

// fromPool tests get a schema of their own (and a 2-connection pool on it), gone after the test.
const { fresh } = useSchemaPerTest('jobsfp', 2);

describe('JobStore.fromPool', () => {
  it('migrates the jobs table through the app pool, and close() leaves the pool open', async () => {
    const { schema: other, pool } = await fresh();
    const s = await JobStore.fromPool(pool);
    expect(s.pool).toBe(pool);
    expect(s.schema).toBe(other.name);
    const [job] = await s.enqueue([{ queue: 'default', type: 't' }]);
    await s.close();
    await expect(s.enqueue([{ queue: 'default', type: 't' }])).rejects.toMatchObject({ code: 'CLOSED' });
    // The pool is still the application's: usable, not ending.
    expect(pool.ending).toBe(false);
    expect((await pool.query('SELECT count(*)::int AS n FROM q_jobs_all')).rows[0].n).toBe(1);
    expect(job!.status).toBe('queued');
    // migrate: false does not touch the schema.
    const again = await JobStore.fromPool(pool, { migrate: false });
    await again.close();
    expect(pool.ending).toBe(false);
  });

  it('refuses what is not a pool, and bad options', async () => {
    await expect(JobStore.fromPool({} as pg.Pool)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(JobStore.fromPool(app, { migrate: 'yes' as unknown as boolean })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    // A pool that cannot connect: a QError, not a raw pg error.
    const dead = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/nowhere', connectionTimeoutMillis: 2_000 });
    dead.on('error', () => undefined);
    try {
      await expect(JobStore.fromPool(dead)).rejects.toMatchObject({ name: 'QError', code: 'CONNECTION' });
    } finally {
      await dead.end();
    }
  });

  it('its listeners connect with the pool’s own settings (password included)', async () => {
    const l = await listening();
    try {
      await store.enqueue([{ queue: 'fp', type: 't' }]);
      await waitUntil(() => l.got.some((n) => n.kind === 'queued' && n.queue === 'fp'));
    } finally {
      await l.close();
    }
  });
});

describe('enqueue(jobs, { client }) in the caller’s transaction', () => {
  it('committed: the job exists after the commit, not before (other sessions do not see it)', async () => {
    const job = await inTx(async (c) => {
      const [j] = await store.enqueue([{ queue: 'default', type: 'email', payload: { to: 'a@example.com' } }], { client: c });
      expect(j).toMatchObject({ status: 'queued', payload: { to: 'a@example.com' } });
      expect(await count()).toBe(0); // another connection: not committed yet
      expect((await c.query('SELECT count(*)::int AS n FROM q_jobs_all')).rows[0].n).toBe(1);
      return j!;
    });
    expect((await store.get(job.uuid))?.id).toBe(job.id);
  });

  it('rolled back: no job, nothing left, and no notification', async () => {
    const l = await listening();
    try {
      await inTx(async (c) => {
        await store.enqueue([{ queue: 'rb', type: 't' }], { client: c });
        await store.enqueue([{ queue: 'rb', type: 't', idempotencyKey: 'rb-key' }], { client: c });
      }, 'ROLLBACK');
      expect(await count()).toBe(0);
      // A later committed enqueue is notified: had the rolled-back one been, it would have come first.
      await inTx((c) => store.enqueue([{ queue: 'after', type: 't' }], { client: c }));
      await waitUntil(() => l.got.length > 0);
      await new Promise((r) => setTimeout(r, 200));
      expect(l.got).toEqual([{ kind: 'queued', queue: 'after' }]);
      // The key of the rolled-back job is free.
      const [j] = await store.enqueue([{ queue: 'rb', type: 't', idempotencyKey: 'rb-key' }]);
      expect(j!.idempotencyKey).toBe('rb-key');
    } finally {
      await l.close();
    }
  });

  it('notifies at commit only: nothing while the transaction is open', async () => {
    const l = await listening();
    try {
      const c = await app.connect();
      try {
        await c.query('BEGIN');
        await store.enqueue([{ queue: 'wake', type: 't' }], { client: c });
        await new Promise((r) => setTimeout(r, 300));
        expect(l.got).toEqual([]);
        await c.query('COMMIT');
      } finally {
        c.release();
      }
      await waitUntil(() => l.got.length === 1);
      expect(l.got).toEqual([{ kind: 'queued', queue: 'wake' }]);
    } finally {
      await l.close();
    }
  });

  it('enqueue then the app write fails: the caller rolls back and nothing is left', async () => {
    await expect(
      inTx(async (c) => {
        await store.enqueue([{ queue: 'default', type: 'ship' }], { client: c });
        await c.query('INSERT INTO orders (item, qty) VALUES ($1, $2)', ['book', 0]); // CHECK fails
      }),
    ).rejects.toMatchObject({ code: '23514' });
    expect(await count()).toBe(0);
    expect(await count('SELECT count(*)::int AS n FROM orders')).toBe(0);
  });

  it('the caller’s own savepoint rolled back drops that job only', async () => {
    await inTx(async (c) => {
      await store.enqueue([{ queue: 'default', type: 'kept' }], { client: c });
      await c.query('SAVEPOINT app_sp');
      await store.enqueue([{ queue: 'default', type: 'dropped' }], { client: c });
      await c.query('ROLLBACK TO SAVEPOINT app_sp');
      await c.query('INSERT INTO orders (item, qty) VALUES ($1, $2)', ['pen', 1]);
    });
    expect((await app.query('SELECT job_type FROM q_jobs_all')).rows).toEqual([{ job_type: 'kept' }]);
    expect(await count('SELECT count(*)::int AS n FROM orders')).toBe(1);
  });

  it('an idempotency conflict returns the existing job and the caller’s transaction still commits', async () => {
    const [original] = await store.enqueue([{ queue: 'default', type: 't', payload: { v: 1 }, idempotencyKey: 'order-1' }]);
    const got = await inTx(async (c) => {
      const [dup] = await store.enqueue([{ queue: 'default', type: 't', payload: { v: 2 }, idempotencyKey: 'order-1' }], { client: c });
      // A key first written in this same transaction resolves to that job too.
      const [fresh] = await store.enqueue([{ queue: 'default', type: 't', idempotencyKey: 'order-2' }], { client: c });
      const [fresh2] = await store.enqueue([{ queue: 'default', type: 't', payload: { v: 3 }, idempotencyKey: 'order-2' }], { client: c });
      await c.query('INSERT INTO orders (item, qty) VALUES ($1, $2)', ['cup', 2]);
      return { dup: dup!, fresh: fresh!, fresh2: fresh2! };
    });
    expect(got.dup.id).toBe(original!.id);
    expect(got.dup.payload).toEqual({ v: 1 });
    expect(got.fresh2.id).toBe(got.fresh.id);
    expect(await count()).toBe(2);
    expect(await count('SELECT count(*)::int AS n FROM orders')).toBe(1);
  });

  it('8 concurrent transactions enqueueing one idempotency key produce one job', async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        inTx(async (c) => {
          await c.query('INSERT INTO orders (item, qty) VALUES ($1, $2)', [`racer-${i}`, 1]);
          const [j] = await store.enqueue([{ queue: 'default', type: 'race', payload: { i }, idempotencyKey: 'one-key' }], { client: c });
          return j!;
        }),
      ),
    );
    expect(new Set(results.map((j) => j.id)).size).toBe(1);
    expect(await count()).toBe(1);
    expect(await count('SELECT count(*)::int AS n FROM orders')).toBe(8);
  });

  it('a bad job is INVALID_ARGUMENT before anything is sent; a value Postgres refuses rolls back the savepoint only', async () => {
    await inTx(async (c) => {
      await c.query('INSERT INTO orders (item, qty) VALUES ($1, $2)', ['mug', 1]);
      const bad = await store.enqueue([{ queue: 'default', type: 't', priority: 1.5 }], { client: c }).catch((e: unknown) => e);
      expect(isQError(bad, 'INVALID_ARGUMENT')).toBe(true);
      // retryOfId of a job that does not exist: the foreign key fails inside q's savepoint.
      const fk = await store.enqueue([{ queue: 'default', type: 't', retryOfId: 987_654 }], { client: c }).catch((e: unknown) => e);
      expect(isQError(fk, 'INVALID_ARGUMENT')).toBe(true);
      // The caller's transaction is still usable.
      await store.enqueue([{ queue: 'default', type: 'ok' }], { client: c });
    });
    expect(await count('SELECT count(*)::int AS n FROM orders')).toBe(1);
    expect((await app.query('SELECT job_type FROM q_jobs_all')).rows).toEqual([{ job_type: 'ok' }]);
  });

  it('more than one chunk: all jobs exist iff the transaction commits', async () => {
    const jobs = Array.from({ length: ENQUEUE_CHUNK + 5 }, (_, i) => ({ queue: 'bulk', type: 't', payload: { i } }));
    await inTx((c) => store.enqueue(jobs, { client: c }), 'ROLLBACK');
    expect(await count()).toBe(0);
    const out = await inTx((c) => store.enqueue(jobs, { client: c }));
    expect(out.map((j) => (j.payload as { i: number }).i)).toEqual(jobs.map((_, i) => i));
    expect(await count()).toBe(ENQUEUE_CHUNK + 5);
  });

  it('leaves the transaction to the caller: still open after the call (no COMMIT, no ROLLBACK by q)', async () => {
    await inTx(async (c) => {
      await store.enqueue([{ queue: 'default', type: 't' }], { client: c });
      const st = await c.query<{ xid: string | null }>('SELECT txid_current_if_assigned()::text AS xid');
      expect(st.rows[0]!.xid).not.toBeNull(); // the caller's transaction holds the write
      const sp = await c.query('SELECT 1 AS one');
      expect(sp.rows).toEqual([{ one: 1 }]);
    }, 'ROLLBACK');
    expect(await count()).toBe(0);
  });

  it('accepts a pg.Client and any object with query(config)', async () => {
    await withClient(schema.dsn, async (c) => {
      await c.query('BEGIN');
      const shaped: TransactionClient = { query: (config) => c.query(config) };
      await store.enqueue([{ queue: 'default', type: 'shaped' }], { client: shaped });
      await store.enqueue([{ queue: 'default', type: 'client' }], { client: c });
      await c.query('COMMIT');
    });
    expect(await count()).toBe(2);
  });

  it('errors: no client, outside a transaction, aborted transaction; a client on another search_path still writes the store schema', async () => {
    await expect(store.enqueue([{ queue: 'default', type: 't' }], {} as { client: TransactionClient })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(store.enqueue([{ queue: 'default', type: 't' }], { client: app })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/not a pool/),
    });
    const c = await app.connect();
    try {
      await expect(store.enqueue([{ queue: 'default', type: 't' }], { client: c })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/not in a transaction/),
      });
      await c.query('BEGIN');
      await c.query('SELECT 1/0').catch(() => undefined);
      await expect(store.enqueue([{ queue: 'default', type: 't' }], { client: c })).rejects.toMatchObject({ code: 'INVALID_STATE' });
      await c.query('ROLLBACK');
      await c.query('BEGIN');
      // Every statement names the store's schema (the search_path check of earlier versions is
      // gone): a client whose search_path holds no job table writes into the store's.
      await c.query('SET LOCAL search_path = pg_catalog');
      const [other] = await store.enqueue([{ queue: 'default', type: 't' }], { client: c });
      await c.query(`SET LOCAL search_path = "${schema.name}"`);
      await store.enqueue([{ queue: 'default', type: 'after' }], { client: c });
      await c.query('COMMIT');
      expect((await store.get(other!.uuid))?.type).toBe('t');
    } finally {
      c.release();
    }
    expect(await count()).toBe(2);
  });
});

describe('Drizzle (drizzle-orm/node-postgres)', () => {
  it('db.transaction: the app row and the job commit together, or neither', async () => {
    const db = drizzle(app);
    const job = await db.transaction(async (tx) => {
      const [order] = await tx.insert(orders).values({ item: 'lamp', qty: 1 }).returning();
      const [j] = await store.enqueue([{ queue: 'default', type: 'order.created', payload: { orderId: order!.id } }], {
        client: drizzleClient(tx),
      });
      return j!;
    });
    expect((await store.get(job.uuid))?.payload).toMatchObject({ orderId: expect.any(Number) });
    expect(await count('SELECT count(*)::int AS n FROM orders')).toBe(1);

    await expect(
      db.transaction(async (tx) => {
        await tx.insert(orders).values({ item: 'chair', qty: 1 });
        await store.enqueue([{ queue: 'default', type: 'order.created' }], { client: drizzleClient(tx) });
        throw new Error('payment declined');
      }),
    ).rejects.toThrow('payment declined');
    expect(await count()).toBe(1);
    expect(await count('SELECT count(*)::int AS n FROM orders')).toBe(1);
  });

  it('a nested Drizzle transaction (savepoint) shares the connection', async () => {
    const db = drizzle(app);
    await db.transaction(async (tx) => {
      await store.enqueue([{ queue: 'default', type: 'outer' }], { client: drizzleClient(tx) });
      await tx
        .transaction(async (inner) => {
          await store.enqueue([{ queue: 'default', type: 'inner' }], { client: drizzleClient(inner) });
          inner.rollback();
        })
        .catch(() => undefined);
    });
    expect((await app.query('SELECT job_type FROM q_jobs_all')).rows).toEqual([{ job_type: 'outer' }]);
  });

  it('drizzleClient refuses what is not a node-postgres transaction', () => {
    expect(() => drizzleClient(drizzle(app))).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => drizzleClient({})).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

async function waitUntil(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
