// Migration 0007: a job's uuid carries its id, and the hot table keeps a uuid index only for the
// rows whose uuid does not (every job made before it). A database of the previous schema (through
// 0006) holding jobs in every status is upgraded: nothing is rewritten, every job is still found by
// its uuid and behaves, new jobs get uuids that carry their ids on every enqueue path, and lookups
// by uuid use an index on a table of thousands of jobs.
import { randomUUID } from 'node:crypto';
import { JOURNAL_TABLE, bundledMigrations } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { useScratchSchemas } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobStore, type Job, type JobStatus } from '../src/index.js';
import { ENQUEUE_CHUNK } from '../src/jobs/ops/enqueue.js';
import { liveJobByUuid } from '../src/jobs/sql/by-uuid.js';
import { jobUuid } from '../src/jobs/uuid.js';

const scratch = useScratchSchemas({ quoteIdent, journalTable: JOURNAL_TABLE });
const { admin } = scratch;

const TOKEN = '44444444-4444-4444-8444-444444444444';
const V8 = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
// One job per status, as the previous build stored them (uuids from the column default).
const SEEDS: Array<{ status: JobStatus; values: string }> = [
  { status: 'queued', values: `'u.queued', 'queued', 0, NULL, NULL, NULL, now(), NULL` },
  { status: 'scheduled', values: `'u.scheduled', 'scheduled', 0, NULL, NULL, NULL, now() + interval '1 hour', NULL` },
  { status: 'leased', values: `'u.leased', 'leased', 1, 'old', gen_random_uuid(), now() + interval '10 minutes', now(), NULL` },
  { status: 'running', values: `'u.running', 'running', 1, 'old', '${TOKEN}', now() + interval '10 minutes', now(), NULL` },
  { status: 'retry_wait', values: `'u.retry', 'retry_wait', 1, NULL, NULL, NULL, now() + interval '1 hour', NULL` },
  { status: 'succeeded', values: `'u.done', 'succeeded', 1, NULL, NULL, NULL, now(), now()` },
  { status: 'cancelled', values: `'u.cancelled', 'cancelled', 0, NULL, NULL, NULL, now(), now()` },
  { status: 'dead_letter', values: `'u.dead', 'dead_letter', 3, NULL, NULL, NULL, now(), now()` },
];
const COLUMNS = 'job_type, status, attempt, leased_by, lease_token, lease_expires_at, run_at, finished_at';

let q: string;
let store: JobStore;
/** Each seeded job as the previous schema stored it (`to_jsonb` of its row), by status. */
const before = new Map<JobStatus, Record<string, unknown>>();

beforeAll(async () => {
  const older = await scratch.olderBuild('jobsuuid', bundledMigrations('jobs'), '0007');
  q = older.quoted;
  for (const seed of SEEDS) {
    await admin.query(`INSERT INTO ${q}.q_jobs (${COLUMNS}) VALUES (${seed.values})`);
    // A finished job moves to the archive as it is inserted (the table's trigger).
    const { rows } = await admin.query<{ row: Record<string, unknown> }>(
      `SELECT to_jsonb(j.*) AS row FROM ${q}.q_jobs_all j WHERE job_type = $1`,
      [/'([^']+)'/.exec(seed.values)![1]],
    );
    before.set(seed.status, rows[0]!.row);
  }
  store = await JobStore.open(older.dsn, { maxConns: 4 }); // applies 0007
});
afterAll(async () => {
  await store?.close();
});

/** How many hot rows the partial uuid index covers: those whose uuid carries no id. */
const otherUuids = async (): Promise<number> =>
  (await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q}.q_jobs WHERE ${q}.q_job_uuid_version(uuid) <> 8`)).rows[0]!.n;

describe('migration 0007 (uuids that carry their job id) on a database of the previous schema', () => {
  it('journals 0007, swaps the uuid index for the partial one and rewrites no job', async () => {
    const { rows } = await admin.query<{ tag: string }>(`SELECT tag FROM ${q}.${JOURNAL_TABLE} WHERE module = 'jobs' ORDER BY tag`);
    expect(rows.map((r) => r.tag)).toEqual(bundledMigrations('jobs').map((m) => m.tag));
    const idx = await admin.query<{ n: string; def: string }>(
      `SELECT indexname AS n, indexdef AS def FROM pg_indexes WHERE schemaname = $1 AND tablename = 'q_jobs' AND indexdef LIKE '%(uuid)%'`,
      [q.replaceAll('"', '')],
    );
    expect(idx.rows.map((r) => r.n)).toEqual(['q_jobs_other_uuid_key']);
    expect(idx.rows[0]!.def).toMatch(/^CREATE UNIQUE INDEX .* WHERE \(.*q_job_uuid_version\(uuid\) <> 8\)$/);
    for (const [status, row] of before) {
      const { rows: now } = await admin.query<{ row: Record<string, unknown> }>(
        `SELECT to_jsonb(j.*) AS row FROM ${q}.q_jobs_all j WHERE id = $1`,
        [row.id],
      );
      // Less the columns a later migration added (0009, 0010, 0011, 0014), which hold their defaults.
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
      } = now[0]!.row;
      expect([snoozes, progress, jobKey, group, scope, slot, flow, ref, left]).toEqual([0, null, null, null, null, null, null, null, null]);
      expect(rest, status).toEqual(row);
    }
    // Every live job made before the migration is in the partial index.
    expect(await otherUuids()).toBe(5);
  });

  it('finds every job made before it by its uuid, in its status; cancels a waiting and a running one', async () => {
    for (const [status, row] of before) expect((await store.get(row.uuid as string))?.status, status).toBe(status);
    expect(await store.cancel(before.get('queued')!.uuid as string)).toBe('cancelled');
    expect(await store.cancel(before.get('running')!.uuid as string)).toBe('cancel_requested');
    expect(await store.get(before.get('queued')!.uuid as string)).toMatchObject({ status: 'cancelled' });
    expect((await store.get(before.get('running')!.uuid as string))?.cancelRequestedAt).toBeInstanceOf(Date);
    // An unknown uuid of either kind finds nothing, and cancels nothing.
    expect(await store.get(jobUuid(Number(before.get('queued')!.id), '00000000-0000-4000-8000-000000000000'))).toBeNull();
    expect(await store.get('00000000-0000-4000-8000-000000000000')).toBeNull();
    expect(await store.cancel('00000000-0000-4000-8000-000000000000')).toBe('not_cancellable');
    expect(await store.cancel(jobUuid(Number(before.get('scheduled')!.id), '00000000-0000-4000-8000-000000000000'))).toBe('not_cancellable');
    expect((await store.get(before.get('scheduled')!.uuid as string))?.status).toBe('scheduled');
  });

  it('gives new jobs uuids that carry their id, on every enqueue path, and indexes none of them', async () => {
    const covered = await otherUuids();
    const made: Job[] = [
      ...(await store.enqueue([{ queue: 'u', type: 'single' }])),
      ...(await store.enqueue([{ queue: 'u', type: 'single-keyed', idempotencyKey: 'u-one' }])),
      ...(await store.enqueue(Array.from({ length: 50 }, () => ({ queue: 'u', type: 'batch' })))),
      ...(await store.enqueue(Array.from({ length: 50 }, (_, i) => ({ queue: 'u', type: 'batch-keyed', idempotencyKey: `u-${i}` })))),
      // Split over several statements (ids drawn first), keyed and not.
      ...(await store.enqueue(
        Array.from({ length: ENQUEUE_CHUNK + 10 }, (_, i) => ({
          queue: 'u',
          type: 'split',
          ...(i % 3 === 0 ? { idempotencyKey: `s-${i}` } : {}),
        })),
      )),
    ];
    expect(new Set(made.map((j) => j.uuid)).size).toBe(made.length);
    for (const job of made) {
      expect(job.uuid).toMatch(V8);
      expect(parseInt(job.uuid.slice(0, 8) + job.uuid.slice(9, 13) + job.uuid.slice(15, 18), 16)).toBe(job.id);
    }
    // What enqueue returned is what is stored, and get finds it by the uuid.
    const { rows } = await admin.query<{ id: string; uuid: string; carried: string }>(
      `SELECT j.id::text, j.uuid::text, ${q}.q_job_uuid_id(j.uuid)::text AS carried FROM ${q}.q_jobs j WHERE queue = 'u' ORDER BY j.id`,
    );
    expect(rows.map((r) => [Number(r.id), r.uuid])).toEqual([...made].sort((a, b) => a.id - b.id).map((j) => [j.id, j.uuid]));
    expect(rows.every((r) => r.carried === r.id)).toBe(true);
    for (const job of made.slice(0, 120)) expect(await store.get(job.uuid)).toEqual(job);
    expect(await otherUuids()).toBe(covered);
    // A key already held returns its job, uuid and all.
    const [again] = await store.enqueue([{ queue: 'u', type: 'single-keyed', idempotencyKey: 'u-one' }]);
    expect(again?.uuid).toBe(made[1]!.uuid);
  });

  it('keeps uuids of another kind unique and findable (a raw INSERT with the column default)', async () => {
    const { rows } = await admin.query<{ uuid: string }>(`INSERT INTO ${q}.q_jobs (queue, job_type) VALUES ('u', 'raw') RETURNING uuid::text`);
    const raw = rows[0]!.uuid;
    expect(raw).not.toMatch(V8);
    expect((await store.get(raw))?.type).toBe('raw');
    await expect(admin.query(`INSERT INTO ${q}.q_jobs (uuid, queue, job_type) VALUES ($1, 'u', 'raw-again')`, [raw])).rejects.toMatchObject({
      code: '23505',
    });
    // A version-8 uuid must carry its own row's id: a copy of a job's uuid is refused, as is one
    // naming an id of no row.
    const [job] = await store.enqueue([{ queue: 'u', type: 'carried' }]);
    for (const uuid of [job!.uuid, jobUuid(job!.id + 1_000_000, job!.uuid)]) {
      await expect(admin.query(`INSERT INTO ${q}.q_jobs (uuid, queue, job_type) VALUES ($1, 'u', 'copy')`, [uuid])).rejects.toMatchObject({
        code: '23514',
        constraint: 'q_jobs_uuid_carries_id',
      });
    }
    // Given a uuid of another kind, a job is found by that one (through the partial index).
    const { rows: given } = await admin.query<{ uuid: string }>(
      `UPDATE ${q}.q_jobs SET uuid = gen_random_uuid() WHERE id = $1 RETURNING uuid::text`,
      [job!.id],
    );
    expect((await store.get(given[0]!.uuid))?.id).toBe(job!.id);
    expect(await store.get(job!.uuid)).toBeNull();
  });

  it('looks a live job up by its uuid through indexes, on a table of thousands of jobs', async () => {
    const jobs = await store.enqueue(Array.from({ length: 5_000 }, () => ({ queue: 'plan', type: 'p' })));
    await admin.query(`ANALYZE ${q}.q_jobs`);
    // A uuid that carries its id goes through the primary key; one made before 0007 through the
    // partial index (the planner sees it carries no id, and drops the other arm).
    const cases: Array<[string, RegExp]> = [
      [jobs[2_500]!.uuid, /Index Scan on q_jobs_pkey/],
      [before.get('scheduled')!.uuid as string, /Index Scan using q_jobs_other_uuid_key on q_jobs j/],
    ];
    for (const [uuid, index] of cases) {
      const c = await admin.connect();
      try {
        await c.query(`SET search_path TO ${q}`);
        // The store's lookup of a live job (sql/by-uuid.ts), its uuid written in.
        const { rows } = await c.query<{ 'QUERY PLAN': string }>(
          `EXPLAIN SELECT j.id FROM q_jobs j WHERE ${liveJobByUuid('j', `'${uuid}'`).replaceAll('__q_schema__.', '')}`,
        );
        const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
        expect(plan, plan).not.toMatch(/Seq Scan on q_jobs j/);
        expect(plan, plan).toMatch(index);
      } finally {
        c.release();
      }
    }
  });

  it('makes the same uuid in SQL (q_job_uuid) as the store does (jobUuid), and reads the id back', async () => {
    const ids = [1, 9, 15, 16, 255, 4_095, 4_096, 65_535, 2 ** 32, 2 ** 48 - 1, 2 ** 48, 2 ** 52 + 7, Number.MAX_SAFE_INTEGER];
    const randoms = ids.map(() => randomUUID());
    const { rows } = await admin.query<{ made: string; back: string }>(
      `SELECT ${q}.q_job_uuid(id, r)::text AS made, ${q}.q_job_uuid_id(${q}.q_job_uuid(id, r))::text AS back
       FROM unnest($1::int8[], $2::uuid[]) WITH ORDINALITY AS u(id, r, i) ORDER BY i`,
      [ids, randoms],
    );
    expect(rows.map((r) => r.made)).toEqual(ids.map((id, i) => jobUuid(id, randoms[i]!)));
    expect(rows.map((r) => r.back)).toEqual(ids.map(String));
    for (const r of rows) expect(r.made).toMatch(V8);
    // An id beyond the layout's 60 bits keeps the random uuid as it is (which carries no id).
    const { rows: big } = await admin.query<{ made: string; back: string | null }>(
      `SELECT ${q}.q_job_uuid(1152921504606846976, $1)::text AS made, ${q}.q_job_uuid_id(${q}.q_job_uuid(1152921504606846976, $1)) AS back`,
      [randoms[0]],
    );
    expect(big[0]).toEqual({ made: randoms[0], back: null });
  });
});
