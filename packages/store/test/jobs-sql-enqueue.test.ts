// q_enqueue_job(queue, type, payload, options): the SQL entry point installed by the jobs migration.
import { useJobStore, withClient, type TestSchema } from '@q/testing';
import pg from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { JobStore, type JobNotification } from '../src/index.js';

let schema: TestSchema;
let store: JobStore;
let sql: pg.Pool; // a plain psql-style session

useJobStore(JobStore, { prefix: 'jobsql', maxConns: 4 }, async (t) => {
  ({ schema, store } = t);
  sql = schema.pool();
  await sql.query(`
    CREATE TABLE orders (id serial PRIMARY KEY, item text NOT NULL);
    CREATE FUNCTION orders_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM q_enqueue_job('default', 'order.created', jsonb_build_object('orderId', NEW.id),
                            jsonb_build_object('idempotencyKey', 'order-' || NEW.id));
      RETURN NEW;
    END $$;
    CREATE TRIGGER orders_enqueue AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION orders_enqueue();`);
});
beforeEach(async () => {
  await sql.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys, orders');
});

const one = async (text: string, values: unknown[] = []) => (await sql.query(text, values)).rows[0];
const count = async () => (await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM q_jobs_all')).rows[0]!.n;

describe('q_enqueue_job', () => {
  it('enqueues from a plain query and returns the job row (id, uuid)', async () => {
    const row = await one(
      `SELECT id, uuid, status FROM q_enqueue_job('default', 'email', '{"to": "a@example.com"}', '{"priority": 3, "maxAttempts": 2, "lockKey": "mail", "teamId": 7}')`,
    );
    expect(row.status).toBe('queued');
    const job = await store.get(row.uuid);
    expect(job).toMatchObject({
      id: Number(row.id),
      queue: 'default',
      type: 'email',
      payload: { to: 'a@example.com' },
      priority: 3,
      maxAttempts: 2,
      lockKey: 'mail',
      teamId: 7,
      attempt: 0,
    });
    // Defaults as enqueue's: payload {}, priority 0, maxAttempts 5.
    const d = await one(`SELECT uuid FROM q_enqueue_job('default', 't')`);
    expect(await store.get(d.uuid)).toMatchObject({ payload: {}, priority: 0, maxAttempts: 5, idempotencyKey: null });
    const n = await one(`SELECT uuid FROM q_enqueue_job('default', 't', 'null', 'null')`);
    expect(await store.get(n.uuid)).toMatchObject({ payload: {}, maxAttempts: 5 });
  });

  it('a future runAt makes the job scheduled at that instant', async () => {
    const at = new Date(Date.now() + 3_600_000);
    const row = await one(`SELECT uuid, status, run_at FROM q_enqueue_job('default', 't', NULL, jsonb_build_object('runAt', $1::text))`, [
      at.toISOString(),
    ]);
    expect(row.status).toBe('scheduled');
    expect(new Date(row.run_at).getTime()).toBe(at.getTime());
  });

  it('an idempotency key returns the original job unchanged', async () => {
    const a = await one(`SELECT id FROM q_enqueue_job('default', 't', '{"v": 1}', '{"idempotencyKey": "k1"}')`);
    const b = await one(`SELECT id, payload FROM q_enqueue_job('default', 't', '{"v": 2}', '{"idempotencyKey": "k1"}')`);
    expect(b.id).toBe(a.id);
    expect(b.payload).toEqual({ v: 1 });
    // The same key through JobStore.enqueue resolves to it as well.
    const [j] = await store.enqueue([{ queue: 'default', type: 't', idempotencyKey: 'k1' }]);
    expect(String(j!.id)).toBe(a.id);
    expect(await count()).toBe(1);
  });

  it('refuses bad input with SQLSTATE 22023 naming the argument, writing nothing', async () => {
    const cases: Array<[string, RegExp]> = [
      [`SELECT q_enqueue_job('', 't')`, /queue must be a non-empty string/],
      [`SELECT q_enqueue_job(NULL, 't')`, /queue must be a non-empty string/],
      [`SELECT q_enqueue_job('default', NULL)`, /type must be a non-empty string/],
      [`SELECT q_enqueue_job('default', '')`, /type must be a non-empty string/],
      [`SELECT q_enqueue_job('default', 't', NULL, '[1]')`, /options must be a JSON object/],
      [`SELECT q_enqueue_job('default', 't', NULL, '{"idempotency_key": "x"}')`, /unknown option\(s\): idempotency_key/],
      [`SELECT q_enqueue_job('default', 't', NULL, '{"priority": 1.5}')`, /priority must be an integer/],
      [`SELECT q_enqueue_job('default', 't', NULL, '{"priority": "1"}')`, /priority must be an integer/],
      [`SELECT q_enqueue_job('default', 't', NULL, '{"priority": 2147483648}')`, /priority must be an integer between/],
      [`SELECT q_enqueue_job('default', 't', NULL, '{"maxAttempts": 0}')`, /maxAttempts must be an integer between 1/],
      [`SELECT q_enqueue_job('default', 't', NULL, '{"teamId": 9007199254740992}')`, /teamId must be a safe integer/],
      [`SELECT q_enqueue_job('default', 't', NULL, '{"idempotencyKey": ""}')`, /idempotencyKey must be a non-empty string/],
      [`SELECT q_enqueue_job('default', 't', NULL, '{"lockKey": 5}')`, /lockKey must be a non-empty string/],
      [`SELECT q_enqueue_job('default', 't', NULL, jsonb_build_object('lockKey', repeat('x', 2049)))`, /lockKey is longer than 2048 bytes/],
      [`SELECT q_enqueue_job('default', 't', NULL, '{"runAt": "tomorrow-ish"}')`, /runAt must be a timestamp string/],
      [`SELECT q_enqueue_job('default', 't', NULL, '{"runAt": "infinity"}')`, /runAt must be a finite timestamp/],
      [`SELECT q_enqueue_job('default', 't', NULL, '{"retryOfId": 424242}')`, /retryOfId refers to a job that does not exist/],
    ];
    for (const [text, message] of cases) {
      const err = (await sql.query(text).catch((e: unknown) => e)) as { code?: string; message?: string };
      expect(err.code, text).toBe('22023');
      expect(err.message, text).toMatch(message);
    }
    expect(await count()).toBe(0);
  });

  it('fires from a trigger on an app table: the job exists iff the insert commits', async () => {
    await sql.query(`INSERT INTO orders (item) VALUES ('lamp')`);
    const c = await sql.connect();
    try {
      await c.query('BEGIN');
      await c.query(`INSERT INTO orders (item) VALUES ('chair')`);
      await c.query('ROLLBACK');
    } finally {
      c.release();
    }
    const rows = (
      await sql.query(`SELECT o.id AS order_id, j.job_type, j.payload FROM orders o JOIN q_jobs_all j ON j.idempotency_key = 'order-' || o.id`)
    ).rows;
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ job_type: 'order.created', payload: { orderId: rows[0].order_id } });
    expect(await count()).toBe(1);
  });

  it('wakes workers at commit (the store’s channel), and not for a rolled-back call', async () => {
    const got: JobNotification[] = [];
    const l = store.listen({ onNotification: (n) => got.push(n) });
    await l.start();
    try {
      const c = await sql.connect();
      try {
        await c.query('BEGIN');
        await c.query(`SELECT q_enqueue_job('rolled', 't')`);
        await c.query('ROLLBACK');
        await c.query('BEGIN');
        await c.query(`SELECT q_enqueue_job('committed', 't')`);
        await c.query(`SELECT q_enqueue_job('later', 't', NULL, jsonb_build_object('runAt', (now() + interval '1 hour')::text))`);
        await new Promise((r) => setTimeout(r, 200));
        expect(got).toEqual([]);
        await c.query('COMMIT');
      } finally {
        c.release();
      }
      const deadline = Date.now() + 10_000;
      while (got.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 200));
      expect(got).toEqual([{ kind: 'queued', queue: 'committed' }]); // scheduled jobs do not wake anyone
    } finally {
      await l.close();
    }
  });

  it('writes its own schema’s table whatever the caller’s search_path', async () => {
    await withClient(schema.serverDsn, async (c) => {
      await c.query('SET search_path = pg_catalog');
      const row = (await c.query(`SELECT uuid FROM "${schema.name}".q_enqueue_job('default', 'qualified')`)).rows[0];
      expect((await store.get(row.uuid))?.type).toBe('qualified');
    });
  });

  it('8 concurrent transactions with one idempotency key produce one job', async () => {
    const ids = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const c = await sql.connect();
        try {
          await c.query('BEGIN');
          const r = await c.query(
            `SELECT id FROM q_enqueue_job('default', 'race', jsonb_build_object('i', $1::int), '{"idempotencyKey": "same"}')`,
            [i],
          );
          await new Promise((res) => setTimeout(res, 20));
          await c.query('COMMIT');
          return r.rows[0].id as string;
        } finally {
          c.release();
        }
      }),
    );
    expect(new Set(ids).size).toBe(1);
    expect(await count()).toBe(1);
  });
});
