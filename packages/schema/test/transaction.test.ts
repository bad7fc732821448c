import { createTestSchema, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { withTransaction } from '../src/internal.js';

let schema: TestSchema;
let pool: pg.Pool;
let admin: pg.Client;

beforeAll(async () => {
  schema = await createTestSchema('tx');
  pool = new pg.Pool({ connectionString: schema.dsn, max: 2 });
  pool.on('error', () => undefined); // idle clients: the pool's own listener
  admin = new pg.Client({ connectionString: schema.serverDsn });
  admin.on('error', () => undefined);
  await admin.connect();
});

afterAll(async () => {
  await admin.end();
  await pool.end();
  await schema.drop();
});

// A checked-out client has no listener of the pool's: a backend terminated between two statements
// (failover, pg_terminate_backend, an idle-in-transaction timeout) would be an unhandled 'error'
// event that kills the process. withTransaction must turn it into a rejection of that call.
it('a backend terminated between two statements rejects the transaction instead of crashing the process', async () => {
  const run = withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    // Let the termination reach the idle, checked-out client before its next statement.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await client.query('SELECT 1');
  });
  await expect(run).rejects.toThrow();
  // The broken connection was destroyed, not handed back: the pool still works.
  const out = await withTransaction(pool, async (client) => (await client.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one);
  expect(out).toBe(1);
});
