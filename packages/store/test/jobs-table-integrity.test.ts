// What raw SQL does to the job tables (migration 0008): TRUNCATE keeps the idempotency keys and the
// id sequence consistent with the jobs that remain, q_enqueue_job bounds the queue and the type as
// enqueue() does, and a row no statement of a maintenance round can write (one a raw INSERT
// wrote) is dead-lettered with the error instead of stopping the round for the whole table.
import { randomBytes } from 'node:crypto';
import { useJobStore, withClient, type TestSchema } from '@q/testing';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { JobStore } from '../src/index.js';

let schema: TestSchema;
let store: JobStore;
let sql: pg.Pool;

useJobStore(JobStore, { prefix: 'jobintegrity', maxConns: 4, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] }, (t) => {
  ({ schema, store } = t);
  sql = schema.pool();
});

const claimOpts = (queue: string, limit = 10) => ({ queues: [queue], workerId: 'w', limit, leaseMs: 60_000, start: true });
/** About 3 KB that no compression shortens: too long for a dequeue index entry. */
const incompressible = () => randomBytes(1_536).toString('hex');

let done = 0;
/** Runs one job (on a queue of its own) to success, so that it is archived. */
async function runToArchive(prefix: string, idempotencyKey?: string): Promise<{ id: number; uuid: string; queue: string }> {
  const queue = `${prefix}-done-${++done}`;
  const [job] = await store.enqueue([{ queue, type: 't', ...(idempotencyKey ? { idempotencyKey } : {}) }]);
  const [lease] = await store.claim(claimOpts(queue, 1));
  expect(lease?.id).toBe(job!.id);
  expect(await store.complete([{ ...lease!, status: 'succeeded', result: null }])).toEqual([true]);
  expect((await store.get(job!.uuid))?.status).toBe('succeeded');
  return { id: job!.id, uuid: job!.uuid, queue };
}

describe('TRUNCATE', () => {
  it('frees the idempotency keys of the jobs it removed: enqueue and q_enqueue_job take them again', async () => {
    const [live] = await store.enqueue([{ queue: 'tr', type: 't', idempotencyKey: 'k-live' }]);
    // A key is held in its queue and type: the archived job's is asked for in its own queue.
    const { queue: archivedQueue } = await runToArchive('tr', 'k-archived');
    await sql.query('TRUNCATE q_jobs');
    // The live job's key is free; the archived job's key is still its own.
    const [again] = await store.enqueue([{ queue: 'tr', type: 't', idempotencyKey: 'k-live' }]);
    expect(again!.id).not.toBe(live!.id);
    expect((await store.get(again!.uuid))?.status).toBe('queued');
    const [dup] = await store.enqueue([{ queue: archivedQueue, type: 't', idempotencyKey: 'k-archived' }]);
    expect((await store.get(dup!.uuid))?.status).toBe('succeeded');

    await sql.query('TRUNCATE q_jobs, q_jobs_archive');
    // q_enqueue_job looped for ever on a key held by a job that no longer exists: bounded here.
    await withClient(schema.dsn, async (c) => {
      await c.query(`SET statement_timeout = '10s'`);
      const { rows } = await c.query<{ status: string }>(`SELECT status FROM q_enqueue_job($1, 't', NULL, '{"idempotencyKey": "k-archived"}')`, [
        archivedQueue,
      ]);
      expect(rows[0]?.status).toBe('queued');
    });
    const [viaStore] = await store.enqueue([{ queue: 'tr', type: 't', idempotencyKey: 'k-live' }]);
    expect((await store.get(viaStore!.uuid))?.status).toBe('queued');
    const { rows } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM q_jobs_idempotency_keys');
    expect(rows[0]?.n).toBe(2);
  });

  it('of the key table alone writes back the keys of the jobs kept', async () => {
    const [live] = await store.enqueue([{ queue: 'trk', type: 't', idempotencyKey: 'k1' }]);
    const archived = await runToArchive('trk', 'k2');
    await sql.query('TRUNCATE q_jobs_idempotency_keys');
    const [a] = await store.enqueue([{ queue: 'trk', type: 't', idempotencyKey: 'k1' }]);
    const [b] = await store.enqueue([{ queue: archived.queue, type: 't', idempotencyKey: 'k2' }]);
    expect(a!.id).toBe(live!.id);
    expect(b!.id).toBe(archived.id);
  });

  it('RESTART IDENTITY keeps new ids past the archived ones: the new jobs run, are archived, and maintenance goes on', async () => {
    const archived = [await runToArchive('tri'), await runToArchive('tri'), await runToArchive('tri')];
    await store.enqueue([{ queue: 'tri', type: 't' }]);
    await sql.query('TRUNCATE q_jobs RESTART IDENTITY');
    const fresh = await store.enqueue([
      { queue: 'tri', type: 't' },
      { queue: 'tri', type: 't' },
    ]);
    const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_archive`);
    expect(rows[0]?.n).toBe(3);
    for (const j of fresh) expect(j.id).toBeGreaterThan(Math.max(...archived.map((a) => a.id)));
    const leases = await store.claim(claimOpts('tri'));
    expect(leases).toHaveLength(2);
    // One succeeds (archived by the completion), one's lease lapses and is dead-lettered by a reap
    // (archived by the table's trigger): both moves need an id the archive does not hold.
    expect(await store.complete([{ ...leases[0]!, status: 'succeeded', result: null }])).toEqual([true]);
    await sql.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second', resume_count = 5 WHERE id = $1`, [leases[1]!.id]);
    const round = await store.maintain();
    expect(round?.reaped).toEqual([expect.objectContaining({ id: leases[1]!.id, status: 'dead_letter' })]);
    expect(round?.failed).toEqual([]);
    for (const j of fresh) expect((await store.get(j.uuid))?.status).toMatch(/succeeded|dead_letter/);
    for (const a of archived) expect((await store.get(a.uuid))?.status).toBe('succeeded');
  });
});

describe('bad rows', () => {
  it('q_enqueue_job refuses a queue or a type longer than 2048 bytes, as enqueue() does', async () => {
    const long = incompressible();
    for (const [text, message] of [
      [`SELECT q_enqueue_job($1, 't', NULL, jsonb_build_object('runAt', (now() + interval '1 hour')::text))`, /queue is longer than 2048 bytes/],
      [`SELECT q_enqueue_job('q', $1)`, /type is longer than 2048 bytes/],
    ] as const) {
      const err = (await sql.query(text, [long]).catch((e: unknown) => e)) as { code?: string; message?: string };
      expect(err.code, text).toBe('22023');
      expect(err.message).toMatch(message);
    }
    await expect(store.enqueue([{ queue: long, type: 't' }])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const { rows } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM q_jobs_all');
    expect(rows[0]?.n).toBe(0);
  });

  it('a due job no promotion can queue (a raw INSERT) is dead-lettered with the error; the others are promoted and reaped', async () => {
    const long = incompressible();
    const { rows: bad } = await sql.query<{ id: string; uuid: string }>(
      `INSERT INTO q_jobs (queue, job_type, status, run_at) VALUES ($1, 't', 'scheduled', now() + interval '300 ms') RETURNING id, uuid`,
      [long],
    );
    const due = await store.enqueue([
      { queue: 'ok', type: 't', runAt: new Date(Date.now() + 300) },
      { queue: 'ok', type: 't', runAt: new Date(Date.now() + 300) },
    ]);
    const [lapsed] = await store.enqueue([{ queue: 'ok2', type: 't' }]);
    const [lease] = await store.claim(claimOpts('ok2', 1));
    expect(lease?.id).toBe(lapsed!.id);
    await sql.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [lapsed!.id]);
    await sql.query(`SELECT pg_sleep(0.4)`);

    const round = await store.maintain();
    expect(round).not.toBeNull();
    // The two due jobs, and the reaped one's retry (due at once).
    expect(round!.promoted).toBe(3);
    expect(round!.reaped).toEqual([{ id: lapsed!.id, uuid: lapsed!.uuid, status: 'retry_wait' }]);
    expect((await store.get(lapsed!.uuid))?.status).toBe('queued');
    expect(round!.failed).toEqual([
      {
        id: Number(bad[0]!.id),
        uuid: bad[0]!.uuid,
        step: 'promote',
        deadLettered: true,
        error: expect.stringMatching(/^maintenance: promote failed on this job.*index row size.*\(SQLSTATE 54000\)$/),
      },
    ]);
    expect(round!.failed[0]!.error).not.toContain(long.slice(0, 16));
    const dead = await store.get(bad[0]!.uuid);
    expect(dead).toMatchObject({ status: 'dead_letter', lastError: round!.failed[0]!.error });
    for (const j of due) expect((await store.get(j.uuid))?.status).toBe('queued');

    // The next rounds run as usual: a new due job is promoted, nothing fails.
    await store.enqueue([{ queue: 'ok', type: 't', runAt: new Date(Date.now() + 50) }]);
    await sql.query(`SELECT pg_sleep(0.1)`);
    expect(await store.maintain()).toMatchObject({ promoted: 1, failed: [] });
  });

  it('promoteDue and a fenced round dead-letter such a row too', async () => {
    const insertBad = async () =>
      (
        await sql.query<{ uuid: string }>(
          `INSERT INTO q_jobs (queue, job_type, status, run_at) VALUES ($1, 't', 'scheduled', now() - interval '1 second') RETURNING uuid`,
          [incompressible()],
        )
      ).rows[0]!.uuid;
    let bad = await insertBad();
    await sql.query(`INSERT INTO q_jobs (queue, job_type, status, run_at) VALUES ('ok', 't', 'scheduled', now() - interval '1 second')`);
    expect(await store.promoteDue()).toBe(1);
    expect((await store.get(bad))?.status).toBe('dead_letter');

    bad = await insertBad();
    await sql.query(`INSERT INTO q_jobs (queue, job_type, status, run_at) VALUES ('ok', 't', 'retry_wait', now() - interval '1 second')`);
    const lease = await store.acquireLeadership('owner-1', 30_000);
    const round = await store.maintainAsLeader(lease!, 30_000);
    expect(round).toMatchObject({ promoted: 1, failed: [expect.objectContaining({ uuid: bad, step: 'promote', deadLettered: true })] });
    expect((await store.get(bad))?.status).toBe('dead_letter');
  });
});
