// Upgrading a database of the previous job schema (migrations 0000–0003: table `jobs`, enum
// `job_status`) through migration 0004 (the `q_` prefix): every job in every status is carried
// over with nothing lost, and each still behaves through the JobStore API afterwards.
import { JOURNAL_TABLE, bundledMigrations } from '@q/schema';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobStore, type JobStatus } from '../src/index.js';

let schema: TestSchema;
let store: JobStore;

const TOKEN_LEASED = '11111111-1111-4111-8111-111111111111';
const TOKEN_RUNNING = '22222222-2222-4222-8222-222222222222';
const STEPS = [
  { name: 'fetch', status: 'succeeded', message: 'ok', started_at: '2026-01-01T00:00:00.000Z', finished_at: '2026-01-01T00:00:01.000Z' },
];

interface Seed {
  status: JobStatus;
  sql: string;
}

// One row per status, written as the previous schema's users wrote them (raw SQL on `jobs`).
const SEEDS: Seed[] = [
  {
    status: 'queued',
    sql: `INSERT INTO jobs (queue, job_type, payload, status, priority, idempotency_key, lock_key, team_id)
      VALUES ('default', 'q.queued', '{"n": 1}', 'queued', 5, 'idem-queued', 'lock-free', 7) RETURNING uuid`,
  },
  {
    status: 'scheduled',
    sql: `INSERT INTO jobs (queue, job_type, status, run_at, resource_id)
      VALUES ('default', 'q.scheduled', 'scheduled', now() + interval '1 hour', 9) RETURNING uuid`,
  },
  {
    status: 'leased',
    sql: `INSERT INTO jobs (queue, job_type, status, attempt, leased_by, lease_token, lease_expires_at, heartbeat_at, lock_key)
      VALUES ('default', 'q.leased', 'leased', 1, 'old-worker', '${TOKEN_LEASED}', now() + interval '10 minutes', now(), 'lock-held') RETURNING uuid`,
  },
  {
    status: 'running',
    sql: `INSERT INTO jobs (queue, job_type, status, attempt, leased_by, lease_token, lease_expires_at, heartbeat_at, steps)
      VALUES ('default', 'q.running', 'running', 2, 'old-worker', '${TOKEN_RUNNING}', now() + interval '10 minutes', now(), '${JSON.stringify(STEPS)}') RETURNING uuid`,
  },
  {
    status: 'retry_wait',
    sql: `INSERT INTO jobs (queue, job_type, status, attempt, last_error, run_at, resume_count)
      VALUES ('default', 'q.retry', 'retry_wait', 1, 'boom', now() + interval '1 hour', 1) RETURNING uuid`,
  },
  {
    status: 'succeeded',
    sql: `INSERT INTO jobs (queue, job_type, status, attempt, result, steps, finished_at, idempotency_key)
      VALUES ('default', 'q.done', 'succeeded', 1, '{"answer": 42}', '${JSON.stringify(STEPS)}', now(), 'idem-done') RETURNING uuid`,
  },
  {
    status: 'cancelled',
    sql: `INSERT INTO jobs (queue, job_type, status, finished_at, cancel_requested_at)
      VALUES ('default', 'q.cancelled', 'cancelled', now(), now()) RETURNING uuid`,
  },
  {
    status: 'dead_letter',
    sql: `INSERT INTO jobs (queue, job_type, status, attempt, max_attempts, last_error, finished_at, dead_lettered_at, steps)
      VALUES ('default', 'q.dead', 'dead_letter', 3, 3, 'fatal: gave up', now(), now(), '${JSON.stringify(STEPS)}') RETURNING uuid`,
  },
];

const uuids = new Map<JobStatus, string>();
let retryOfUuid: string;

beforeAll(async () => {
  schema = await createTestSchema('jobsup');
  const c = await schema.pool().connect();
  try {
    await c.query('BEGIN');
    await c.query(`CREATE TABLE ${JOURNAL_TABLE} (module text NOT NULL, tag text NOT NULL, hash text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (module, tag))`);
    // The previous schema: the jobs module up to 0003, journalled as migrate() would have.
    for (const m of bundledMigrations('jobs').filter((m) => m.tag < '0004')) {
      for (const s of m.statements) await c.query(s);
      await c.query(`INSERT INTO ${JOURNAL_TABLE} (module, tag, hash) VALUES ($1, $2, $3)`, [m.module, m.tag, m.hash]);
    }
    for (const seed of SEEDS) uuids.set(seed.status, (await c.query<{ uuid: string }>(seed.sql)).rows[0]!.uuid);
    // A retry of the dead letter (retry_of_id: the foreign key must survive), enqueued through the old SQL function.
    retryOfUuid = (
      await c.query<{ uuid: string }>(
        `SELECT uuid FROM q_enqueue_job('default', 'q.dead', NULL, jsonb_build_object('retryOfId', (SELECT id FROM jobs WHERE status = 'dead_letter'), 'lockKey', 'lock-held'))`,
      )
    ).rows[0]!.uuid;
    await c.query('COMMIT');
  } finally {
    c.release();
  }
  store = await JobStore.open(schema.dsn, { maxConns: 4 }); // applies 0004
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
});

describe('migration 0004 (q_ prefix) on a database of the previous schema', () => {
  it('renames every job object and leaves no old name behind', async () => {
    const { rows } = await store.pool.query<Record<string, string | null>>(`SELECT
      to_regclass('jobs')::text AS old_table, to_regtype('job_status')::text AS old_type,
      to_regclass('q_jobs')::text AS new_table, to_regtype('q_job_status')::text AS new_type,
      to_regclass('q_jobs_id_seq')::text AS seq`);
    expect(rows[0]).toEqual({ old_table: null, old_type: null, new_table: 'q_jobs', new_type: 'q_job_status', seq: 'q_jobs_id_seq' });
    const idx = await store.pool.query<{ n: string }>(
      `SELECT indexname AS n FROM pg_indexes WHERE schemaname = $1 AND tablename = 'q_jobs' ORDER BY 1`,
      [schema.name],
    );
    expect(idx.rows.map((r) => r.n)).toEqual([
      'q_jobs_dequeue_idx',
      // Migration 0014: a flow's live nodes.
      'q_jobs_flow_idx',
      // Migration 0011: each group's queued jobs in dequeue order.
      'q_jobs_group_dequeue_idx',
      // Migration 0009 dropped q_jobs_idempotency_key_key: keys are held per queue and type in q_jobs_idempotency_keys.
      // Migration 0010: the pending jobs' job keys.
      'q_jobs_job_key_pending_key',
      'q_jobs_lease_expiry_idx',
      // Migration 0011: the per-group concurrency slots of leased and running jobs.
      'q_jobs_limit_slot_key',
      'q_jobs_lock_key_active_key',
      // Migration 0007: the uuid index covers only uuids that carry no id of their own.
      'q_jobs_other_uuid_key',
      'q_jobs_pkey',
      'q_jobs_status_id_idx',
      'q_jobs_team_id_id_idx',
      'q_jobs_waiting_run_at_idx',
    ]);
    const { rows: journal } = await store.pool.query<{ tag: string }>(`SELECT tag FROM ${JOURNAL_TABLE} WHERE module = 'jobs' ORDER BY tag`);
    expect(journal.map((r) => r.tag)).toEqual(bundledMigrations('jobs').map((m) => m.tag));
  });

  it('carries every job over in its status with its fields (get and list)', async () => {
    for (const [status, uuid] of uuids) {
      const job = await store.get(uuid);
      expect(job?.status, status).toBe(status);
      const page = await store.list({ status, limit: 100 });
      expect(
        page.jobs.map((j) => j.uuid),
        status,
      ).toContain(uuid);
    }
    expect(await store.get(uuids.get('queued')!)).toMatchObject({
      payload: { n: 1 },
      priority: 5,
      idempotencyKey: 'idem-queued',
      lockKey: 'lock-free',
      teamId: 7,
    });
    expect(await store.get(uuids.get('scheduled')!)).toMatchObject({ resourceId: 9 });
    expect(await store.get(uuids.get('leased')!)).toMatchObject({ attempt: 1, leasedBy: 'old-worker', lockKey: 'lock-held' });
    expect(await store.get(uuids.get('running')!)).toMatchObject({ attempt: 2, steps: STEPS });
    expect(await store.get(uuids.get('retry_wait')!)).toMatchObject({ lastError: 'boom', resumeCount: 1 });
    expect(await store.get(uuids.get('succeeded')!)).toMatchObject({ result: { answer: 42 }, steps: STEPS, idempotencyKey: 'idem-done' });
    const dead = await store.get(uuids.get('dead_letter')!);
    expect(dead).toMatchObject({ lastError: 'fatal: gave up', attempt: 3, maxAttempts: 3, steps: STEPS });
    expect(dead?.deadLetteredAt).toBeInstanceOf(Date);
    expect((await store.get(retryOfUuid))?.retryOfId).toBe(dead!.id);
  });

  it('keeps idempotency keys unique across the rename (queued and finished originals are returned)', async () => {
    const [a, b] = await store.enqueue([
      { queue: 'default', type: 'q.queued', idempotencyKey: 'idem-queued' },
      { queue: 'default', type: 'q.done', idempotencyKey: 'idem-done' },
    ]);
    expect(a!.uuid).toBe(uuids.get('queued'));
    expect(b!.uuid).toBe(uuids.get('succeeded'));
  });

  it('fences with the old leases: the running job completes under its token, the leased one renews; a wrong token is refused', async () => {
    const running = (await store.get(uuids.get('running')!))!;
    const leased = (await store.get(uuids.get('leased')!))!;
    expect(await store.heartbeat([{ id: leased.id, leaseToken: TOKEN_LEASED }], 60_000)).toEqual([{ id: leased.id, cancelRequested: false }]);
    expect(await store.succeed({ id: running.id, leaseToken: TOKEN_LEASED }, 'wrong')).toBe(false);
    expect(await store.succeed({ id: running.id, leaseToken: TOKEN_RUNNING }, { fine: true })).toBe(true);
    expect(await store.get(running.uuid)).toMatchObject({ status: 'succeeded', result: { fine: true }, steps: STEPS });
  });

  it('claims in priority order; a lock key held by a carried-over lease still blocks its jobs', async () => {
    const claimed = await store.claim({ queues: ['default'], workerId: 'new-worker', limit: 10, leaseMs: 30_000 });
    // The queued job; the retry of the dead letter waits for lock-held (leased above).
    expect(claimed.map((j) => j.uuid)).toEqual([uuids.get('queued')]);
    const next = await store.get(retryOfUuid);
    expect(next?.status).toBe('queued');
    // New ids continue after the carried-over ones (the identity sequence was renamed, not reset).
    const [fresh] = await store.enqueue([{ queue: 'other', type: 'new' }]);
    expect(fresh!.id).toBeGreaterThan(
      Math.max(...(await store.list({ limit: 100 })).jobs.filter((j) => j.uuid !== fresh!.uuid).map((j) => j.id)),
    );
  });

  it('dead letter: retried by a new job referring to it, then forgotten; waiting jobs cancel', async () => {
    const dead = (await store.get(uuids.get('dead_letter')!))!;
    const [retry] = await store.enqueue([{ queue: 'default', type: dead.type, payload: dead.payload, retryOfId: dead.id }]);
    expect(retry?.retryOfId).toBe(dead.id);
    expect(await store.forgetDeadLetter(dead.uuid)).toBe(true);
    expect((await store.get(dead.uuid))?.status).toBe('cancelled');
    expect(await store.cancel(uuids.get('scheduled')!)).toBe('cancelled');
    expect(await store.cancel(uuids.get('retry_wait')!)).toBe('cancelled');
  });

  it('q_enqueue_job keeps its name and writes q_jobs whatever the caller search_path', async () => {
    const c = await store.pool.connect();
    try {
      await c.query('SET search_path = pg_catalog');
      const { rows } = await c.query<{ uuid: string }>(`SELECT uuid FROM "${schema.name}".q_enqueue_job('default', 'sql.job')`);
      expect((await store.get(rows[0]!.uuid))?.type).toBe('sql.job');
    } finally {
      await c.query('RESET search_path');
      c.release();
    }
  });
});
