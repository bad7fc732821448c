// Upgrading a database of the previous job schema (migrations through 0005: one q_jobs table
// holding every job for good) through migration 0006 (finished jobs move to q_jobs_archive,
// idempotency keys to q_jobs_idempotency_keys): every job in every status is carried over with
// every field, each table holds what it should, and every job still behaves through the store.
import { JOURNAL_TABLE, bundledMigrations } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { useScratchSchemas } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobStore, type Job, type JobStatus } from '../src/index.js';

const scratch = useScratchSchemas({ quoteIdent, journalTable: JOURNAL_TABLE });
const { admin } = scratch;

const TOKEN_LEASED = '33333333-3333-4333-8333-333333333333';
const TOKEN_RUNNING = '44444444-4444-4444-8444-444444444444';
const STEPS = [
  { name: 'fetch', status: 'succeeded', message: 'ok', started_at: '2026-01-01T00:00:00.000Z', finished_at: '2026-01-01T00:00:01.000Z' },
];

// One row per status as the previous build left them, with the columns each status carries.
const SEEDS: Array<{ status: JobStatus; values: string }> = [
  { status: 'queued', values: `'q.queued', 'queued', 0, NULL, NULL, 'idem-live', 'lock-free', NULL, NULL, '[]', NULL, 7, now(), NULL, NULL` },
  {
    status: 'scheduled',
    values: `'q.scheduled', 'scheduled', 0, NULL, NULL, NULL, NULL, NULL, NULL, '[]', NULL, NULL, now() + interval '1 hour', NULL, NULL`,
  },
  {
    status: 'leased',
    values: `'q.leased', 'leased', 1, 'old-worker', '${TOKEN_LEASED}', NULL, 'lock-held', now() + interval '10 minutes', NULL, '[]', NULL, NULL, now(), NULL, NULL`,
  },
  {
    status: 'running',
    values: `'q.running', 'running', 2, 'old-worker', '${TOKEN_RUNNING}', 'idem-running', NULL, now() + interval '10 minutes', NULL, '${JSON.stringify(STEPS)}', NULL, NULL, now(), NULL, NULL`,
  },
  {
    status: 'retry_wait',
    values: `'q.retry', 'retry_wait', 1, NULL, NULL, NULL, NULL, NULL, 'boom', '[]', NULL, NULL, now() + interval '1 hour', NULL, NULL`,
  },
  {
    status: 'succeeded',
    values: `'q.done', 'succeeded', 1, NULL, NULL, 'idem-done', NULL, NULL, 'flaky once', '${JSON.stringify(STEPS)}', '{"answer": 42}', 7, now(), now() - interval '2 hours', NULL`,
  },
  {
    status: 'cancelled',
    values: `'q.cancelled', 'cancelled', 0, NULL, NULL, 'idem-cancelled', NULL, NULL, NULL, '[]', NULL, NULL, now(), now(), NULL`,
  },
  {
    status: 'dead_letter',
    values: `'q.dead', 'dead_letter', 3, NULL, NULL, NULL, NULL, NULL, 'fatal: gave up', '${JSON.stringify(STEPS)}', NULL, NULL, now(), now() - interval '2 hours', now()`,
  },
];
const COLUMNS = `job_type, status, attempt, leased_by, lease_token, idempotency_key, lock_key, lease_expires_at, last_error, steps, result,
  team_id, run_at, finished_at, dead_lettered_at`;
const LIVE: JobStatus[] = ['queued', 'scheduled', 'leased', 'running', 'retry_wait'];
const FINISHED: JobStatus[] = ['succeeded', 'cancelled', 'dead_letter'];

let q: string;
let store: JobStore;
/** Every seeded row as the previous schema stored it (`to_jsonb` of the row), by status. */
const before = new Map<JobStatus, Record<string, unknown>>();
let retryUuid: string;

beforeAll(async () => {
  const older = await scratch.olderBuild('jobsarch', bundledMigrations('jobs'), '0006');
  q = older.quoted;
  for (const seed of SEEDS) {
    const { rows } = await admin.query<{ row: Record<string, unknown> }>(
      `INSERT INTO ${q}.q_jobs (${COLUMNS}) VALUES (${seed.values}) RETURNING to_jsonb(q_jobs.*) AS row`,
    );
    before.set(seed.status, rows[0]!.row);
  }
  // A retry of the dead letter, referring to it (the old foreign key).
  const dead = before.get('dead_letter')!;
  retryUuid = (
    await admin.query<{ uuid: string }>(`INSERT INTO ${q}.q_jobs (job_type, retry_of_id) VALUES ('q.dead', $1) RETURNING uuid`, [dead.id])
  ).rows[0]!.uuid;
  store = await JobStore.open(older.dsn, { maxConns: 4 }); // applies 0006
});
afterAll(async () => {
  await store?.close();
});

// The columns a later migration added (0009: snoozes, progress; 0010: job_key; 0011: job_group,
// limit_scope, limit_slot; 0014: flow_id, flow_ref, parents_left) hold their defaults and are left out of the comparison with the rows written before.
const rowsOf = async (table: string): Promise<Array<Record<string, unknown>>> =>
  (await admin.query<{ row: Record<string, unknown> }>(`SELECT to_jsonb(t.*) AS row FROM ${q}.${table} t ORDER BY id`)).rows.map((r) => {
    const {
      snoozes,
      progress,
      job_key: jobKey,
      job_group: group,
      limit_scope: scope,
      limit_slot: slot,
      flow_id: flow,
      flow_ref: ref,
      parents_left: left,
      ...rest
    } = r.row;
    expect([snoozes, progress, jobKey, group, scope, slot, flow, ref, left]).toEqual([0, null, null, null, null, null, null, null, null]);
    return rest;
  });

describe('migration 0006 (archive of finished jobs) on a database of the previous schema', () => {
  it('journals 0006 and moves each job to the table of its status, every column unchanged', async () => {
    const { rows } = await admin.query<{ tag: string }>(`SELECT tag FROM ${q}.${JOURNAL_TABLE} WHERE module = 'jobs' ORDER BY tag`);
    expect(rows.map((r) => r.tag)).toEqual(bundledMigrations('jobs').map((m) => m.tag));
    const hot = await rowsOf('q_jobs');
    const archived = await rowsOf('q_jobs_archive');
    expect(hot.map((r) => r.status).sort()).toEqual([...LIVE, 'queued'].sort()); // the retry is queued
    expect(archived.map((r) => r.status).sort()).toEqual([...FINISHED].sort());
    for (const status of LIVE)
      expect(
        hot.find((r) => r.id === before.get(status)!.id),
        status,
      ).toEqual(before.get(status));
    for (const status of FINISHED)
      expect(
        archived.find((r) => r.id === before.get(status)!.id),
        status,
      ).toEqual(before.get(status));
  });

  it('records every idempotency key, live and finished, with its job', async () => {
    // Keyed by their scope since migration 0009: each row names its job, whose queue, type and key it digests.
    const { rows } = await admin.query<{ k: string; id: string }>(
      `SELECT j.idempotency_key AS k, x.job_id::text AS id FROM ${q}.q_jobs_idempotency_keys x
         LEFT JOIN ${q}.q_jobs_all j ON j.id = x.job_id AND x.scope = ${q}.q_idempotency_scope(j.queue, j.job_type, j.idempotency_key)
       ORDER BY 1`,
    );
    const id = (s: JobStatus) => String(before.get(s)!.id);
    expect(rows).toEqual([
      { k: 'idem-cancelled', id: id('cancelled') },
      { k: 'idem-done', id: id('succeeded') },
      { k: 'idem-live', id: id('queued') },
      { k: 'idem-running', id: id('running') },
    ]);
  });

  it('get and list read every job in its status, with its result, steps and errors', async () => {
    const all = (await store.list({ limit: 100 })).jobs;
    expect(all).toHaveLength(SEEDS.length + 1);
    for (const { status } of SEEDS) {
      const uuid = before.get(status)!.uuid as string;
      expect((await store.get(uuid))?.status, status).toBe(status);
      expect(
        (await store.list({ status, limit: 100 })).jobs.map((j) => j.uuid),
        status,
      ).toContain(uuid);
    }
    const done = await store.get(before.get('succeeded')!.uuid as string);
    expect(done).toMatchObject({ result: { answer: 42 }, steps: STEPS, lastError: 'flaky once', teamId: 7, idempotencyKey: 'idem-done' });
    const dead = await store.get(before.get('dead_letter')!.uuid as string);
    expect(dead).toMatchObject({ lastError: 'fatal: gave up', attempt: 3, steps: STEPS });
    expect(dead?.deadLetteredAt).toBeInstanceOf(Date);
    expect((await store.get(retryUuid))?.retryOfId).toBe(Number(before.get('dead_letter')!.id));
    expect((await store.list({ teamId: 7, limit: 10 })).jobs.map((j) => j.status).sort()).toEqual(['queued', 'succeeded']);
    // The backlog counts the live jobs and the archived dead letter.
    expect(await store.backlog()).toEqual(
      expect.arrayContaining([
        { queue: 'default', status: 'dead_letter', count: 1 },
        { queue: 'default', status: 'queued', count: 2 },
        { queue: 'default', status: 'running', count: 1 },
      ]),
    );
  });

  it('keeps idempotency keys unique across both tables: live and archived originals are returned', async () => {
    const again = await store.enqueue(
      [
        ['idem-live', 'q.queued'],
        ['idem-done', 'q.done'],
        ['idem-cancelled', 'q.cancelled'],
        ['idem-new', 'again'],
      ].map(([k, type]) => ({ queue: 'default', type: type!, idempotencyKey: k })),
    );
    expect(again.slice(0, 3).map((j) => j.uuid)).toEqual([
      before.get('queued')!.uuid,
      before.get('succeeded')!.uuid,
      before.get('cancelled')!.uuid,
    ]);
    expect(again[3]).toMatchObject({ type: 'again', status: 'queued' });
  });

  it('fences with the old leases; a final outcome moves the job to the archive, a retry keeps it live', async () => {
    const running = (await store.get(before.get('running')!.uuid as string))!;
    const leased = (await store.get(before.get('leased')!.uuid as string))!;
    expect(await store.succeed({ id: running.id, leaseToken: TOKEN_LEASED }, 'wrong')).toBe(false);
    expect(await store.succeed({ id: running.id, leaseToken: TOKEN_RUNNING }, { fine: true })).toBe(true);
    expect(await store.fail({ id: leased.id, leaseToken: TOKEN_LEASED }, 'again', 60_000)).toBe(true);
    const where = async (job: Job) =>
      (
        await admin.query<{ t: string; status: string }>(
          `SELECT 'hot' AS t, status::text FROM ${q}.q_jobs WHERE id = $1 UNION ALL SELECT 'archive', status::text FROM ${q}.q_jobs_archive WHERE id = $1`,
          [job.id],
        )
      ).rows;
    expect(await where(running)).toEqual([{ t: 'archive', status: 'succeeded' }]);
    expect(await where(leased)).toEqual([{ t: 'hot', status: 'retry_wait' }]);
    expect(await store.get(running.uuid)).toMatchObject({ status: 'succeeded', result: { fine: true }, steps: STEPS, attempt: 2 });
    // Its key stays held by it in the archive.
    const [dup] = await store.enqueue([{ queue: 'default', type: 'q.running', idempotencyKey: 'idem-running' }]);
    expect(dup!.uuid).toBe(running.uuid);
  });

  it('dead letter: retried by a new job referring to the archived original, forgotten; waiting jobs cancel into the archive', async () => {
    const dead = (await store.get(before.get('dead_letter')!.uuid as string))!;
    const [retry] = await store.enqueue([{ queue: 'default', type: dead.type, retryOfId: dead.id }]);
    expect(retry?.retryOfId).toBe(dead.id);
    await expect(store.enqueue([{ queue: 'default', type: 't', retryOfId: 987_654_321 }])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(await store.forgetDeadLetter(dead.uuid)).toBe(true);
    expect((await store.get(dead.uuid))?.status).toBe('cancelled');
    expect(await store.cancel(before.get('scheduled')!.uuid as string)).toBe('cancelled');
    const { rows } = await admin.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${q}.q_jobs WHERE status IN ('succeeded', 'cancelled', 'dead_letter')`,
    );
    expect(rows[0]!.n).toBe(0);
  });

  it('purgeFinished removes old finished jobs with their keys (the key is free again), and nothing live', async () => {
    await admin.query(`UPDATE ${q}.q_jobs_archive SET finished_at = now() - interval '3 hours' WHERE status = 'cancelled'`);
    const live = (await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q}.q_jobs`)).rows[0]!.n;
    // The two hours old success and every cancelled job (the seeded one, the forgotten dead letter, the scheduled one).
    expect(await store.purgeFinished(60 * 60_000)).toBe(4);
    expect((await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q}.q_jobs`)).rows[0]!.n).toBe(live);
    expect(await store.get(before.get('succeeded')!.uuid as string)).toBeNull();
    const { rows } = await admin.query<{ k: string | null }>(
      `SELECT j.idempotency_key AS k FROM ${q}.q_jobs_idempotency_keys x LEFT JOIN ${q}.q_jobs_all j ON j.id = x.job_id ORDER BY 1`,
    );
    expect(rows.map((r) => r.k)).toEqual(['idem-live', 'idem-new', 'idem-running']);
    const [fresh] = await store.enqueue([{ queue: 'default', type: 'q.done', idempotencyKey: 'idem-done' }]);
    expect(fresh).toMatchObject({ type: 'q.done', status: 'queued' });
    expect(fresh!.uuid).not.toBe(before.get('succeeded')!.uuid);
  });
});
