// JobStore: enqueue, claim order, lock keys, fencing, reaping, listing — on real Postgres.
import { isQError } from '@q/schema';
import { useJobStore } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { JobStore, decodeCursor, encodeCursor, type LeasedJob } from '../src/index.js';

let store: JobStore;
const LEASE = 30_000;

useJobStore(JobStore, { prefix: 'jobs', maxConns: 8, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] }, (t) => ({ store } = t));

const claim = (limit = 1, queues = ['default'], workerId = 'w1') => store.claim({ queues, workerId, limit, leaseMs: LEASE });
const lease = (j: LeasedJob) => ({ id: j.id, leaseToken: j.leaseToken });
const status = async (id: number) => (await store.getById(id))!.status;

describe('enqueue', () => {
  it('defaults: queued now, payload {}, maxAttempts 5, attempt 0, steps []', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    expect(job).toMatchObject({
      status: 'queued',
      payload: {},
      maxAttempts: 5,
      attempt: 0,
      priority: 0,
      steps: [],
      resumeCount: 0,
      result: null,
      lastError: null,
      idempotencyKey: null,
      lockKey: null,
      retryOfId: null,
    });
    expect(job!.uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(Math.abs(job!.runAt.getTime() - (await store.now()).getTime())).toBeLessThan(5_000);
  });

  it('future runAt → scheduled at that instant; past runAt → queued at the database now', async () => {
    const now = await store.now();
    const future = new Date(now.getTime() + 60_000);
    const [s, q] = await store.enqueue([
      { queue: 'default', type: 't', runAt: future },
      { queue: 'default', type: 't', runAt: new Date(now.getTime() - 3_600_000) },
    ]);
    expect(s!.status).toBe('scheduled');
    expect(s!.runAt.getTime()).toBe(future.getTime());
    expect(q!.status).toBe('queued');
    expect(q!.runAt.getTime()).toBeGreaterThanOrEqual(now.getTime() - 1_000);
  });

  it('an idempotency-key conflict in the same queue and type returns the original unchanged, also inside one batch', async () => {
    const [a] = await store.enqueue([{ queue: 'default', type: 'a', payload: { n: 1 }, idempotencyKey: 'k1' }]);
    const [b] = await store.enqueue([{ queue: 'default', type: 'a', payload: { n: 2 }, idempotencyKey: 'k1' }]);
    expect(b).toEqual(a);
    const batch = await store.enqueue([
      { queue: 'default', type: 'x', payload: { n: 3 }, idempotencyKey: 'k2' },
      { queue: 'default', type: 'x', payload: { n: 4 }, idempotencyKey: 'k2' },
      { queue: 'default', type: 'a', idempotencyKey: 'k1' },
    ]);
    expect(batch[1]!.uuid).toBe(batch[0]!.uuid);
    expect(batch[1]!.payload).toEqual({ n: 3 });
    expect(batch[2]!.uuid).toBe(a!.uuid);
    const { rows } = await store.pool.query('SELECT count(*)::int AS n FROM q_jobs_all');
    expect(rows[0].n).toBe(2);
  });

  it('a deleted job frees its idempotency key, live or archived; a finished job keeps it', async () => {
    const [live, done] = await store.enqueue([
      { queue: 'default', type: 'live', idempotencyKey: 'del-live' },
      { queue: 'default', type: 'done', idempotencyKey: 'del-done' },
    ]);
    await store.pool.query(`UPDATE q_jobs SET status = 'succeeded', finished_at = now() WHERE id = $1`, [done!.id]);
    const keys = async () =>
      (
        await store.pool.query<{ k: string | null }>(
          'SELECT j.idempotency_key AS k FROM q_jobs_idempotency_keys x LEFT JOIN q_jobs_all j ON j.id = x.job_id ORDER BY 1',
        )
      ).rows.map((r) => r.k);
    // Moved to the archive by the trigger: still holding its key.
    expect((await store.enqueue([{ queue: 'default', type: 'done', idempotencyKey: 'del-done' }]))[0]!.uuid).toBe(done!.uuid);
    expect(await keys()).toEqual(['del-done', 'del-live']);
    // An application's own DELETE, of a live job and of an archived one.
    await store.pool.query('DELETE FROM q_jobs WHERE id = $1', [live!.id]);
    await store.pool.query('DELETE FROM q_jobs_archive WHERE id = $1', [done!.id]);
    expect(await keys()).toEqual([]);
    const again = await store.enqueue([
      { queue: 'default', type: 'live', payload: { n: 1 }, idempotencyKey: 'del-live' },
      { queue: 'default', type: 'done', payload: { n: 2 }, idempotencyKey: 'del-done' },
    ]);
    expect(again.map((j) => j.payload)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(again.map((j) => j.uuid)).not.toContain(live!.uuid);
    const { rows } = await store.pool.query<{ uuid: string }>(
      `SELECT uuid FROM q_enqueue_job('default', 'live', NULL, '{"idempotencyKey": "del-live"}')`,
    );
    expect(rows[0]!.uuid).toBe(again[0]!.uuid);
  });

  it.each([
    ['BigInt', { n: 1n }],
    [
      'circular',
      (() => {
        const o: Record<string, unknown> = {};
        o.self = o;
        return o;
      })(),
    ],
    ['function', () => 1],
    ['nested function', { f: () => 1 }],
    ['\\u0000', { s: 'a\u0000b' }],
  ])('a %s payload is INVALID_ARGUMENT mentioning payload, nothing written', async (_name, payload) => {
    const err = await store
      .enqueue([
        { queue: 'default', type: 'ok' },
        { queue: 'default', type: 't', payload },
      ])
      .catch((e: unknown) => e);
    expect(isQError(err, 'INVALID_ARGUMENT')).toBe(true);
    expect((err as Error).message).toContain('payload');
    const { rows } = await store.pool.query('SELECT count(*)::int AS n FROM q_jobs_all');
    expect(rows[0].n).toBe(0);
  });

  it.each([
    ['maxAttempts 0', { maxAttempts: 0 }],
    ['maxAttempts 1.5', { maxAttempts: 1.5 }],
    ['priority out of int32', { priority: 2 ** 31 }],
    ['invalid runAt', { runAt: new Date(NaN) }],
    ['non-string lock key', { lockKey: 5 as unknown as string }],
  ])('%s is INVALID_ARGUMENT', async (_name, extra) => {
    await expect(store.enqueue([{ queue: 'default', type: 't', ...extra }])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('a retryOfId that does not exist is INVALID_ARGUMENT', async () => {
    await expect(store.enqueue([{ queue: 'default', type: 't', retryOfId: 999_999 }])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('several chunks are all or none', async () => {
    const many = Array.from({ length: 2_100 }, (_, i) => ({ queue: 'default', type: 't', payload: { i } }));
    many.push({ queue: 'default', type: 't', payload: { i: -1 }, retryOfId: 999_999 } as (typeof many)[number]);
    await expect(store.enqueue(many)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const { rows } = await store.pool.query('SELECT count(*)::int AS n FROM q_jobs_all');
    expect(rows[0].n).toBe(0);
    const ok = await store.enqueue(many.slice(0, 2_100));
    expect(ok.map((j) => (j.payload as { i: number }).i)).toEqual(many.slice(0, 2_100).map((_, i) => i));
  });
});

describe('claim', () => {
  it('orders by priority DESC, run_at, id; negative priorities last; future and other queues excluded', async () => {
    const now = await store.now();
    await store.enqueue([
      { queue: 'default', type: 'neg', priority: -5 },
      { queue: 'default', type: 'zero-1' },
      { queue: 'default', type: 'high', priority: 10 },
      { queue: 'default', type: 'zero-2' },
      { queue: 'deploy', type: 'mid', priority: 5 },
      { queue: 'default', type: 'future', priority: 100, runAt: new Date(now.getTime() + 3_600_000) },
      { queue: 'unknown', type: 'elsewhere', priority: 100 },
    ]);
    // A queued row whose run_at lies ahead (set directly) is not eligible either.
    await store.pool.query(`UPDATE q_jobs SET status = 'queued' WHERE job_type = 'future'`);
    const got = await claim(10, ['default', 'deploy']);
    expect(got.map((j) => j.type)).toEqual(['high', 'mid', 'zero-1', 'zero-2', 'neg']);
    for (const j of got) {
      expect(j).toMatchObject({ status: 'leased', attempt: 1, leasedBy: 'w1' });
      expect(j.leaseToken).toMatch(/^[0-9a-f-]{36}$/);
    }
    expect(new Set(got.map((j) => j.leaseToken)).size).toBe(5);
    expect(await claim(10, ['default', 'deploy'])).toEqual([]);
  });

  it('start: true claims straight into running (no separate markRunning write)', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const [l] = await store.claim({ queues: ['default'], workerId: 'w1', limit: 1, leaseMs: LEASE, start: true });
    expect(l).toMatchObject({ id: job!.id, status: 'running', attempt: 1 });
    expect(await store.markRunning([lease(l!)])).toEqual([]);
    expect(await store.heartbeat([lease(l!)], LEASE)).toHaveLength(1);
  });

  it('eight concurrent claimers lease each of 20 jobs exactly once', async () => {
    await store.enqueue(Array.from({ length: 20 }, (_, i) => ({ queue: 'default', type: 't', payload: { i } })));
    const seen: number[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        for (;;) {
          const got = await claim(2, ['default'], `w${w}`);
          if (got.length === 0) return;
          seen.push(...got.map((j) => j.id));
        }
      }),
    );
    expect(seen).toHaveLength(20);
    expect(new Set(seen).size).toBe(20);
  });

  it('lock key: a held key blocks its queued jobs; a batch takes one job per key', async () => {
    await store.enqueue([
      { queue: 'default', type: 'a1', lockKey: 'A' },
      { queue: 'default', type: 'a2', lockKey: 'A' },
      { queue: 'default', type: 'b1', lockKey: 'B' },
      { queue: 'default', type: 'free' },
    ]);
    const first = await claim(10);
    expect(first.map((j) => j.type)).toEqual(['a1', 'b1', 'free']);
    expect(await claim(10)).toEqual([]);
    const a1 = first[0]!;
    await store.succeed(lease(a1), 'ok');
    expect((await claim(10)).map((j) => j.type)).toEqual(['a2']);
  });

  it('lock-key race: concurrent claimers never hold two jobs of one key and never fail', async () => {
    await store.enqueue(Array.from({ length: 30 }, () => ({ queue: 'default', type: 't', lockKey: 'one' })));
    const claimers = Array.from({ length: 6 }, (_, w) => `race${w}`);
    let done = 0;
    let maxActive = 0;
    const deadline = Date.now() + 40_000;
    await Promise.all(
      claimers.map(async (w) => {
        while (done < 30 && Date.now() < deadline) {
          const got = await store.claim({ queues: ['default'], workerId: w, limit: 4, leaseMs: LEASE });
          expect(got.length).toBeLessThanOrEqual(1);
          const { rows } = await store.pool.query(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status IN ('leased','running')`);
          maxActive = Math.max(maxActive, rows[0].n);
          for (const j of got) {
            await store.succeed(lease(j));
            done++;
          }
        }
      }),
    );
    expect(done).toBe(30);
    expect(maxActive).toBeLessThanOrEqual(1);
  });
});

describe('fencing', () => {
  it('markRunning once; heartbeat/succeed/fail/steps need the current token', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const [l] = await claim();
    expect(await store.markRunning([lease(l!)])).toEqual([{ id: job!.id, cancelRequested: false }]);
    expect(await store.markRunning([lease(l!)])).toEqual([]);
    const wrong = { id: l!.id, leaseToken: '00000000-0000-4000-8000-000000000000' };
    expect(await store.heartbeat([wrong], LEASE)).toEqual([]);
    expect(await store.updateSteps(wrong, [{ name: 'x', status: 'running' }])).toBe(false);
    expect(await store.succeed(wrong, 1)).toBe(false);
    expect(await store.fail(wrong, 'boom', 1000)).toBe(false);
    expect(await status(job!.id)).toBe('running');
    expect(await store.heartbeat([lease(l!)], LEASE)).toHaveLength(1);
    expect(await store.updateSteps(lease(l!), [{ name: 'x', status: 'running' }])).toBe(true);
    expect(await store.succeed(lease(l!), { ok: true })).toBe(true);
    expect(await store.succeed(lease(l!), { ok: false })).toBe(false);
    const done = (await store.getById(job!.id))!;
    expect(done).toMatchObject({ status: 'succeeded', result: { ok: true }, leasedBy: null, leaseExpiresAt: null });
    expect(done.finishedAt).not.toBeNull();
    expect(done.steps).toEqual([{ name: 'x', status: 'running' }]);
  });

  it('a stale execution (lease reaped and re-leased) changes nothing', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const [old] = await claim(1, ['default'], 'same-worker');
    await store.markRunning([lease(old!)]);
    // Move the lease into the past through the database, then reap and re-lease.
    await store.pool.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [job!.id]);
    expect(await store.reapExpired()).toEqual([{ id: job!.id, uuid: job!.uuid, status: 'retry_wait' }]);
    expect(await store.promoteDue()).toBe(1);
    const [fresh] = await claim(1, ['default'], 'same-worker');
    expect(fresh!.id).toBe(job!.id);
    expect(fresh!.attempt).toBe(1); // the crashed attempt was given back
    const before = await store.getById(job!.id);
    expect(await store.heartbeat([lease(old!)], LEASE)).toEqual([]);
    expect(await store.updateSteps(lease(old!), [{ name: 'stale', status: 'running' }])).toBe(false);
    expect(await store.succeed(lease(old!), 'stale')).toBe(false);
    expect(await store.fail(lease(old!), 'stale', null)).toBe(false);
    expect(await store.markRunning([lease(old!)])).toEqual([]);
    expect(await store.release([lease(old!)])).toEqual([]);
    expect(await store.getById(job!.id)).toEqual(before);
  });
});

describe('outcomes', () => {
  it('complete writes a batch of mixed outcomes in one call', async () => {
    await store.enqueue(Array.from({ length: 4 }, (_, i) => ({ queue: 'default', type: `t${i}`, maxAttempts: 2 })));
    const got = await claim(4);
    const [a, b, c, d] = got;
    const ok = await store.complete([
      { ...lease(a!), status: 'succeeded', result: 'done', steps: [{ name: 's', status: 'succeeded' }] },
      { ...lease(b!), status: 'retry_wait', error: 'boom\nstack', retryDelayMs: 60_000 },
      { ...lease(c!), status: 'dead_letter', error: 'fatal' },
      { ...lease(d!), status: 'succeeded', result: { big: 1n } },
    ]);
    expect(ok).toEqual([true, true, true, true]);
    const [ja, jb, jc, jd] = await Promise.all(got.map((j) => store.getById(j.id)));
    expect(ja).toMatchObject({ status: 'succeeded', result: 'done', steps: [{ name: 's', status: 'succeeded' }] });
    expect(jb).toMatchObject({ status: 'retry_wait', lastError: 'boom\nstack', finishedAt: null, deadLetteredAt: null });
    expect(jb!.runAt.getTime() - (await store.now()).getTime()).toBeGreaterThan(50_000);
    expect(jc).toMatchObject({ status: 'dead_letter', lastError: 'fatal' });
    expect(jc!.deadLetteredAt).not.toBeNull();
    expect(jc!.finishedAt).not.toBeNull();
    expect(jd).toMatchObject({ status: 'succeeded', result: null });
  });

  it('reap: attempt given back, resume_count rises, last_error kept, the 4th crash dead-letters', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't', maxAttempts: 1 }]);
    const expire = () => store.pool.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [job!.id]);
    for (let crash = 1; crash <= 4; crash++) {
      const [l] = await claim();
      expect(l!.attempt).toBe(1);
      await store.markRunning([lease(l!)]);
      await expire();
      const [reaped] = await store.reapExpired();
      const j = (await store.getById(job!.id))!;
      expect(j.resumeCount).toBe(crash);
      if (crash < 4) {
        expect(reaped!.status).toBe('retry_wait');
        expect(j.attempt).toBe(0);
        expect(j.lastError).toBe('lease expired (worker crash or hang)');
        await store.promoteDue();
      } else {
        expect(reaped!.status).toBe('dead_letter');
        expect(j.attempt).toBe(1);
        expect(j.deadLetteredAt).not.toBeNull();
      }
    }
  });

  it('reap keeps an earlier failure message', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const [l1] = await claim();
    await store.fail(lease(l1!), 'boom', 0);
    await store.promoteDue();
    await claim();
    await store.pool.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [job!.id]);
    await store.reapExpired();
    expect((await store.getById(job!.id))!.lastError).toBe('boom');
  });

  it('release gives the attempt back and re-queues at once; maintain runs under the lock', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const [l] = await claim();
    expect(await store.release([lease(l!)])).toEqual([job!.id]);
    expect(await store.getById(job!.id)).toMatchObject({ status: 'queued', attempt: 0, leasedBy: null });
    const [again] = await claim();
    await store.pool.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [again!.id]);
    const r = await store.maintain();
    expect(r!.reaped).toHaveLength(1);
    expect(r!.promoted).toBe(1);
    expect(await status(job!.id)).toBe('queued');
  });

  it('scheduled jobs are promoted only once due', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't', runAt: new Date((await store.now()).getTime() + 60_000) }]);
    expect(await store.promoteDue()).toBe(0);
    expect(await claim()).toEqual([]);
    await store.pool.query(`UPDATE q_jobs SET run_at = now() - interval '1 millisecond' WHERE id = $1`, [job!.id]);
    expect(await store.promoteDue()).toBe(1);
    expect((await claim()).map((j) => j.id)).toEqual([job!.id]);
  });
});

describe('cancel, forget, purge', () => {
  it('cancel: waiting → cancelled; running → requested (heartbeat reports it, outcome becomes cancelled)', async () => {
    const [waiting, active] = await store.enqueue([
      { queue: 'default', type: 'w', runAt: new Date(Date.now() + 3_600_000) },
      { queue: 'deploy', type: 'a' },
    ]);
    expect(await store.cancel(waiting!.uuid)).toBe('cancelled');
    expect(await store.cancel(waiting!.uuid)).toBe('not_cancellable');
    const [l] = await claim(1, ['deploy']);
    await store.markRunning([lease(l!)]);
    expect(await store.cancel(active!.uuid)).toBe('cancel_requested');
    expect(await store.heartbeat([lease(l!)], LEASE)).toEqual([{ id: active!.id, cancelRequested: true }]);
    expect(await store.succeed(lease(l!), 'late')).toBe(true);
    expect(await status(active!.id)).toBe('cancelled');
    expect(await store.cancel('00000000-0000-4000-8000-000000000000')).toBe('not_cancellable');
    await expect(store.cancel('nope')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('forgetDeadLetter only moves dead letters; purgeFinished deletes old finished jobs', async () => {
    const [a, b] = await store.enqueue([
      { queue: 'default', type: 'a', maxAttempts: 1 },
      { queue: 'default', type: 'b' },
    ]);
    const [la, lb] = await claim(2);
    await store.fail(lease(la!), 'fatal', null);
    await store.succeed(lease(lb!));
    expect(await store.forgetDeadLetter(b!.uuid)).toBe(false);
    expect(await store.forgetDeadLetter(a!.uuid)).toBe(true);
    expect(await status(a!.id)).toBe('cancelled');
    expect(await store.purgeFinished(60_000)).toBe(0);
    await store.pool.query(`UPDATE q_jobs_archive SET finished_at = now() - interval '2 minutes'`);
    expect(await store.purgeFinished(60_000)).toBe(2);
  });
});

describe('list', () => {
  it('pages id DESC with an opaque cursor and filters', async () => {
    const jobs = await store.enqueue(
      Array.from({ length: 7 }, (_, i) => ({ queue: i % 2 ? 'deploy' : 'default', type: 't', teamId: i < 5 ? 1 : 2 })),
    );
    const ids = jobs.map((j) => j.id).reverse();
    const p1 = await store.list({ limit: 3 });
    expect(p1.jobs.map((j) => j.id)).toEqual(ids.slice(0, 3));
    const p2 = await store.list({ limit: 3, cursor: p1.nextCursor! });
    expect(p2.jobs.map((j) => j.id)).toEqual(ids.slice(3, 6));
    const p3 = await store.list({ limit: 3, cursor: p2.nextCursor! });
    expect(p3.jobs.map((j) => j.id)).toEqual(ids.slice(6));
    expect(p3.nextCursor).toBeNull();
    expect((await store.list({ teamId: 1, queue: 'deploy' })).jobs).toHaveLength(2);
    expect((await store.list({ status: 'queued', type: 't' })).jobs).toHaveLength(7);
    expect(decodeCursor(encodeCursor(42))).toBe(42);
    for (const bad of [
      { limit: 0 },
      { limit: 101 },
      { cursor: 'garbage!' },
      { cursor: Buffer.from('v2:1').toString('base64url') },
      { status: 'failed' as never },
    ]) {
      await expect(store.list(bad)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
  });
});
