// Migration 0009: an idempotency key is held per (queue, job type, key). The same key under another
// type or in another queue makes a new job; the same triple returns the job holding it, on every
// enqueue path (one job, a batch, a batch split over statements, the caller's transaction,
// q_enqueue_job). enqueueResults says which jobs a call created, and of concurrent enqueues of one
// scoped key exactly one is created. An empty job type is refused before anything is written. A
// database of the previous schema (through 0008) keeps its keys, now scoped, across the upgrade.
import { JOURNAL_TABLE, bundledMigrations, isQError } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { inTransaction, useJobStore, useScratchSchemas, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENQUEUE_CHUNK, JobStore, type EnqueueResult, type NewJob } from '../src/index.js';

let schema: TestSchema;
let store: JobStore;
let sql: pg.Pool; // a plain session, as an application's SQL would run

useJobStore(JobStore, { prefix: 'jobscope', maxConns: 12, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] }, (t) => {
  ({ schema, store } = t);
  sql = schema.pool();
});

const count = async () => (await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM q_jobs_all')).rows[0]!.n;
const created = (rs: readonly EnqueueResult[]) => rs.map((r) => r.created);

describe('a key is held per queue and job type', () => {
  it('the same key under another type or in another queue makes a new job; the same triple returns the first', async () => {
    const [first] = await store.enqueueResults([{ queue: 'mail', type: 'send', payload: { n: 1 }, idempotencyKey: 'k' }]);
    expect(first).toMatchObject({ created: true, job: { queue: 'mail', type: 'send', payload: { n: 1 }, idempotencyKey: 'k' } });
    // One job at a time (the single-job statement).
    const [otherType] = await store.enqueueResults([{ queue: 'mail', type: 'bounce', payload: { n: 2 }, idempotencyKey: 'k' }]);
    const [otherQueue] = await store.enqueueResults([{ queue: 'sms', type: 'send', payload: { n: 3 }, idempotencyKey: 'k' }]);
    const [same] = await store.enqueueResults([{ queue: 'mail', type: 'send', payload: { n: 4 }, idempotencyKey: 'k' }]);
    expect(otherType).toMatchObject({ created: true, job: { queue: 'mail', type: 'bounce', payload: { n: 2 } } });
    expect(otherQueue).toMatchObject({ created: true, job: { queue: 'sms', type: 'send', payload: { n: 3 } } });
    expect(same!.created).toBe(false);
    expect(same!.job).toStrictEqual(first!.job);
    expect(new Set([first, otherType, otherQueue].map((r) => r!.job.uuid)).size).toBe(3);
    expect(await count()).toBe(3);
    // The existing enqueue returns the same jobs.
    const jobs = await store.enqueue([
      { queue: 'mail', type: 'send', idempotencyKey: 'k' },
      { queue: 'mail', type: 'bounce', idempotencyKey: 'k' },
      { queue: 'sms', type: 'send', idempotencyKey: 'k' },
    ]);
    expect(jobs.map((j) => j.uuid)).toEqual([first!.job.uuid, otherType!.job.uuid, otherQueue!.job.uuid]);
    expect(await count()).toBe(3);
  });

  it('in one batch: each scope makes one job, a repeat of a scope returns it (created: false)', async () => {
    const [held] = await store.enqueue([{ queue: 'q', type: 'a', payload: { held: true }, idempotencyKey: 'b1' }]);
    const batch: NewJob[] = [
      { queue: 'q', type: 'b', payload: { i: 0 }, idempotencyKey: 'b1' },
      { queue: 'q', type: 'a', payload: { i: 1 }, idempotencyKey: 'b1' },
      { queue: 'q2', type: 'a', payload: { i: 2 }, idempotencyKey: 'b1' },
      { queue: 'q', type: 'b', payload: { i: 3 }, idempotencyKey: 'b1' },
      { queue: 'q', type: 'b', payload: { i: 4 } },
    ];
    const rs = await store.enqueueResults(batch);
    expect(created(rs)).toEqual([true, false, true, false, true]);
    expect(rs[1]!.job).toStrictEqual(held);
    expect(rs[3]!.job).toStrictEqual(rs[0]!.job);
    expect(rs.map((r) => r.job.payload)).toEqual([{ i: 0 }, { held: true }, { i: 2 }, { i: 0 }, { i: 4 }]);
    for (const r of rs) expect(r.job).toStrictEqual(await store.get(r.job.uuid));
    expect(await count()).toBe(4);
  });

  it('a batch split over several statements scopes its keys alike', async () => {
    const [held] = await store.enqueue([{ queue: 'split', type: 'a', idempotencyKey: 'k-1' }]);
    const n = ENQUEUE_CHUNK + 10;
    // Keys k-0 … k-(n-1), each under type a and type b: type a's k-1 is held.
    const batch: NewJob[] = Array.from({ length: 2 * n }, (_, i) => ({
      queue: 'split',
      type: i % 2 === 0 ? 'a' : 'b',
      payload: { i },
      idempotencyKey: `k-${Math.floor(i / 2)}`,
    }));
    const rs = await store.enqueueResults(batch);
    expect(rs.filter((r) => !r.created).map((r) => r.job.uuid)).toEqual([held!.uuid]);
    expect(rs[2]!.job.uuid).toBe(held!.uuid);
    rs.forEach((r, i) => {
      expect(r.job).toMatchObject({ type: batch[i]!.type, idempotencyKey: batch[i]!.idempotencyKey });
      if (r.created) expect(r.job.payload).toEqual({ i });
    });
    expect(await count()).toBe(2 * n);
  });

  it('a finished job keeps its key in its scope only', async () => {
    const [job] = await store.enqueue([{ queue: 'fin', type: 't', idempotencyKey: 'fk' }]);
    await sql.query(`UPDATE q_jobs SET status = 'succeeded', finished_at = now() WHERE id = $1`, [job!.id]);
    const rs = await store.enqueueResults([
      { queue: 'fin', type: 't', idempotencyKey: 'fk' },
      { queue: 'fin', type: 'u', idempotencyKey: 'fk' },
    ]);
    expect(created(rs)).toEqual([false, true]);
    expect(rs[0]!.job).toMatchObject({ uuid: job!.uuid, status: 'succeeded' });
  });

  it('q_enqueue_job scopes keys alike, and finds the jobs enqueue made (and enqueue finds its)', async () => {
    const [viaStore] = await store.enqueue([{ queue: 'sqlq', type: 't', idempotencyKey: 'sk' }]);
    const call = async (queue: string, type: string, key: string) =>
      (
        await sql.query<{ uuid: string }>(`SELECT uuid FROM q_enqueue_job($1, $2, NULL, jsonb_build_object('idempotencyKey', $3::text))`, [
          queue,
          type,
          key,
        ])
      ).rows[0]!.uuid;
    expect(await call('sqlq', 't', 'sk')).toBe(viaStore!.uuid);
    const otherType = await call('sqlq', 'u', 'sk');
    const otherQueue = await call('sqlq2', 't', 'sk');
    expect(new Set([viaStore!.uuid, otherType, otherQueue]).size).toBe(3);
    expect(await call('sqlq', 'u', 'sk')).toBe(otherType);
    const [back] = await store.enqueueResults([{ queue: 'sqlq2', type: 't', idempotencyKey: 'sk' }]);
    expect(back).toMatchObject({ created: false, job: { uuid: otherQueue } });
    expect(await count()).toBe(3);
  });

  it('a key whose job is deleted is free again in its scope', async () => {
    const [a, b] = await store.enqueue([
      { queue: 'del', type: 'a', idempotencyKey: 'dk' },
      { queue: 'del', type: 'b', idempotencyKey: 'dk' },
    ]);
    await sql.query('DELETE FROM q_jobs WHERE id = $1', [a!.id]);
    const rs = await store.enqueueResults([
      { queue: 'del', type: 'a', idempotencyKey: 'dk' },
      { queue: 'del', type: 'b', idempotencyKey: 'dk' },
    ]);
    expect(created(rs)).toEqual([true, false]);
    expect(rs[1]!.job.uuid).toBe(b!.uuid);
    const { rows } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM q_jobs_idempotency_keys');
    expect(rows[0]!.n).toBe(2);
  });
});

describe('concurrent enqueues of one scoped key', () => {
  it('8 pool enqueues at once: one created, every one returns its job', async () => {
    const rs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => store.enqueueResults([{ queue: 'race', type: 't', payload: { i }, idempotencyKey: 'one' }])),
    );
    expect(rs.filter(([r]) => r!.created)).toHaveLength(1);
    expect(new Set(rs.map(([r]) => r!.job.uuid)).size).toBe(1);
    expect(await count()).toBe(1);
  });

  it('8 transactions holding their insert open: one created, each type its own job', async () => {
    const racers = Array.from({ length: 8 }, (_, i) =>
      inTransaction(sql, async (c) => {
        // Two types under one key in each transaction: one job per type in the end.
        const rs = await store.enqueueResults(
          [
            { queue: 'race', type: 'a', payload: { i }, idempotencyKey: 'tx' },
            { queue: 'race', type: 'b', payload: { i }, idempotencyKey: 'tx' },
          ],
          { client: c },
        );
        // Held open a moment, so the others wait on the keys this one inserted.
        await new Promise((res) => setTimeout(res, 20));
        return rs;
      }),
    );
    const rs = await Promise.all(racers);
    for (const k of [0, 1]) {
      expect(rs.filter((r) => r[k]!.created)).toHaveLength(1);
      expect(new Set(rs.map((r) => r[k]!.job.uuid)).size).toBe(1);
    }
    expect(rs[0]![0]!.job.uuid).not.toBe(rs[0]![1]!.job.uuid);
    expect(await count()).toBe(2);
  });
});

describe('an empty job type is refused', () => {
  it('by enqueue and enqueueResults, INVALID_ARGUMENT before anything is written', async () => {
    for (const jobs of [
      [{ queue: 'e', type: '' }],
      [
        { queue: 'e', type: 'ok' },
        { queue: 'e', type: '' },
      ],
    ] as NewJob[][]) {
      const err = await store.enqueue(jobs).catch((e: unknown) => e);
      expect(isQError(err, 'INVALID_ARGUMENT')).toBe(true);
      expect((err as Error).message).toMatch(/^enqueue: type must be a non-empty string/);
      expect(isQError(await store.enqueueResults(jobs).catch((e: unknown) => e), 'INVALID_ARGUMENT')).toBe(true);
    }
    expect(await count()).toBe(0);
    // A type of spaces is a type a handler can be registered for.
    const [spaces] = await store.enqueueResults([{ queue: 'e', type: '  ' }]);
    expect(spaces).toMatchObject({ created: true, job: { type: '  ' } });
  });

  it('by upsertSchedule', async () => {
    const err = await store
      .upsertSchedule({ name: 'empty-type', cron: '* * * * *', timezone: 'UTC', queue: 'e', type: '', nextFireAt: new Date() })
      .catch((e: unknown) => e);
    expect(isQError(err, 'INVALID_ARGUMENT')).toBe(true);
    expect((err as Error).message).toMatch(/^schedule: type must be a non-empty string/);
    expect((await store.listSchedules()).map((s) => s.name)).not.toContain('empty-type');
  });

  it('by q_enqueue_job with SQLSTATE 22023', async () => {
    const err = (await sql.query(`SELECT q_enqueue_job('e', '')`).catch((e: unknown) => e)) as { code?: string; message?: string };
    expect(err.code).toBe('22023');
    expect(err.message).toMatch(/q_enqueue_job: type must be a non-empty string/);
    expect(await count()).toBe(0);
  });
});

describe('migration 0009 on a database of the previous schema (through 0008)', () => {
  const scratch = useScratchSchemas({ quoteIdent, journalTable: JOURNAL_TABLE });
  const { admin } = scratch;
  let q: string;
  let upgraded: JobStore;
  const uuids = new Map<string, string>();

  beforeAll(async () => {
    const older = await scratch.olderBuild('jobscopeup', bundledMigrations('jobs'), '0009');
    q = older.quoted;
    // Keys as the previous build held them (global): a live job, a finished one, and one whose
    // job a raw DELETE with triggers off left behind (no holder).
    const seeds: Array<[string, string, string, string]> = [
      ['live', 'mail', 'send', 'old-live'],
      ['done', 'mail', 'send', 'old-done'],
    ];
    for (const [name, queue, type, key] of seeds) {
      const { rows } = await admin.query<{ uuid: string }>(
        `SELECT uuid FROM ${q}.q_enqueue_job($1, $2, NULL, jsonb_build_object('idempotencyKey', $3::text))`,
        [queue, type, key],
      );
      uuids.set(name, rows[0]!.uuid);
    }
    await admin.query(`UPDATE ${q}.q_jobs SET status = 'succeeded', finished_at = now() WHERE uuid = $1`, [uuids.get('done')]);
    await admin.query(`INSERT INTO ${q}.q_jobs_idempotency_keys (idempotency_key, job_id) VALUES ('orphan', 987654)`);
    upgraded = await JobStore.open(older.dsn, { maxConns: 4 }); // applies 0009
  });
  afterAll(async () => {
    await upgraded?.close();
  });

  it('journals 0009, drops the global index, and scopes every kept key by its job', async () => {
    const { rows: journal } = await admin.query<{ tag: string }>(`SELECT tag FROM ${q}.${JOURNAL_TABLE} WHERE module = 'jobs' ORDER BY tag`);
    expect(journal.map((r) => r.tag)).toEqual(bundledMigrations('jobs').map((m) => m.tag));
    const { rows: idx } = await admin.query<{ n: string }>(
      `SELECT indexname AS n FROM pg_indexes WHERE schemaname = $1 AND tablename = 'q_jobs' AND indexdef LIKE '%idempotency%'
         AND indexname <> 'q_jobs_job_key_pending_key'`, // 0010: the job keys' index, by q_idempotency_scope
      [q.replaceAll('"', '')],
    );
    expect(idx).toEqual([]);
    const { rows } = await admin.query<{ k: string | null; ok: boolean | null }>(
      `SELECT j.idempotency_key AS k, x.scope = ${q}.q_idempotency_scope(j.queue, j.job_type, j.idempotency_key) AS ok
       FROM ${q}.q_jobs_idempotency_keys x LEFT JOIN ${q}.q_jobs_all j ON j.id = x.job_id ORDER BY 1`,
    );
    // The orphan key (no job) is gone; the two kept jobs' keys are scoped.
    expect(rows).toEqual([
      { k: 'old-done', ok: true },
      { k: 'old-live', ok: true },
    ]);
  });

  it('the old keys still dedupe in their scope, through the store and q_enqueue_job, and are free in another', async () => {
    const rs = await upgraded.enqueueResults([
      { queue: 'mail', type: 'send', idempotencyKey: 'old-live' },
      { queue: 'mail', type: 'send', idempotencyKey: 'old-done' },
      { queue: 'mail', type: 'bounce', idempotencyKey: 'old-live' },
      { queue: 'mail', type: 'send', idempotencyKey: 'orphan' },
    ]);
    expect(created(rs)).toEqual([false, false, true, true]);
    expect(rs[0]!.job.uuid).toBe(uuids.get('live'));
    expect(rs[1]!.job).toMatchObject({ uuid: uuids.get('done'), status: 'succeeded' });
    const { rows } = await admin.query<{ uuid: string }>(
      `SELECT uuid FROM ${q}.q_enqueue_job('mail', 'send', NULL, '{"idempotencyKey": "old-done"}')`,
    );
    expect(rows[0]!.uuid).toBe(uuids.get('done'));
  });
});
