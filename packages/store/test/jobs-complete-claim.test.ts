// JobStore.completeAndClaim: outcomes and replacement claims in one statement, on real Postgres.
import { isQError } from '@q/schema';
import { useJobStore } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { JobStore, type ClaimOptions, type LeasedJob } from '../src/index.js';
import { COMPLETE_CHUNK } from '../src/jobs/batches.js';

let store: JobStore;
const LEASE = 30_000;

useJobStore(
  JobStore,
  { prefix: 'jobs_cc', maxConns: 8, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] },
  (t) => ({ store } = t),
);

const opts = (limit: number, workerId = 'w1'): ClaimOptions => ({ queues: ['default'], workerId, limit, leaseMs: LEASE, start: true });
const lease = (j: LeasedJob) => ({ id: j.id, leaseToken: j.leaseToken });
const row = async (id: number) => (await store.getById(id))!;

describe('completeAndClaim', () => {
  it('writes mixed outcomes and claims replacements in priority order, in one call', async () => {
    await store.enqueue([
      { queue: 'default', type: 'first', priority: 5 },
      { queue: 'default', type: 'second', priority: 5 },
      { queue: 'default', type: 'low', priority: -1 },
      { queue: 'default', type: 'mid' },
      { queue: 'other', type: 'elsewhere', priority: 9 },
    ]);
    const held = await store.claim(opts(2));
    expect(held.map((j) => j.type)).toEqual(['first', 'second']);
    const r = await store.completeAndClaim(
      [
        { ...lease(held[0]!), status: 'succeeded', result: { ok: 1 }, steps: [] },
        { ...lease(held[1]!), status: 'retry_wait', error: 'boom', retryDelayMs: 60_000 },
      ],
      opts(5),
    );
    expect(r.written).toEqual([true, true]);
    expect(r.jobs.map((j) => j.type)).toEqual(['mid', 'low']);
    expect(r.jobs.every((j) => j.status === 'running' && j.attempt === 1 && j.leasedBy === 'w1')).toBe(true);
    expect(await row(held[0]!.id)).toMatchObject({ status: 'succeeded', result: { ok: 1 }, finishedAt: expect.any(Date) });
    expect(await row(held[1]!.id)).toMatchObject({ status: 'retry_wait', lastError: 'boom', finishedAt: null });
    // The replacements hold real leases: their tokens fence like any claim's.
    expect(await store.heartbeat(r.jobs.map(lease), LEASE)).toHaveLength(2);
  });

  it('a fenced outcome is not written (false) and does not stop the claim', async () => {
    await store.enqueue([
      { queue: 'default', type: 'a' },
      { queue: 'default', type: 'b' },
    ]);
    const [a] = await store.claim(opts(1));
    const stale = { ...lease(a!), leaseToken: '00000000-0000-4000-8000-000000000000' };
    const r = await store.completeAndClaim([{ ...stale, status: 'succeeded' }], opts(1));
    expect(r.written).toEqual([false]);
    expect(r.jobs.map((j) => j.type)).toEqual(['b']);
    expect((await row(a!.id)).status).toBe('running');
    // A cancel requested during the attempt still wins over its outcome.
    await store.cancel((await row(a!.id)).uuid);
    const again = await store.completeAndClaim([{ ...lease(a!), status: 'succeeded' }], opts(1));
    expect(again).toEqual({ written: [true], jobs: [] });
    expect((await row(a!.id)).status).toBe('cancelled');
  });

  it('reports every outcome of a mixed batch: written, fenced, a lease given twice, a token in upper case', async () => {
    await store.enqueue(Array.from({ length: 5 }, (_, i) => ({ queue: 'default', type: `j${i}` })));
    const [a, b, c, d] = await store.claim(opts(4));
    const r = await store.completeAndClaim(
      [
        { ...lease(a!), status: 'succeeded' },
        { ...lease(b!), leaseToken: '00000000-0000-4000-8000-000000000000', status: 'succeeded' },
        { ...lease(c!), leaseToken: c!.leaseToken.toUpperCase(), status: 'retry_wait', error: 'x', retryDelayMs: 60_000 },
        { ...lease(a!), status: 'succeeded' },
        { ...lease(d!), status: 'dead_letter', error: 'y' },
      ],
      opts(5),
    );
    expect(r.written).toEqual([true, false, true, false, true]);
    expect(r.jobs.map((j) => j.type)).toEqual(['j4']);
    expect((await row(a!.id)).status).toBe('succeeded');
    expect((await row(b!.id)).status).toBe('running');
    expect((await row(c!.id)).status).toBe('retry_wait');
    expect((await row(d!.id)).status).toBe('dead_letter');
  });

  // A batch larger than one statement's share goes out in several; each statement reports only
  // the leases it did not write, so a fenced outcome in an earlier statement must still come
  // back false, and every other one true.
  it('reports the fenced outcomes of every statement when a batch is split (complete, then completeAndClaim)', async () => {
    const n = COMPLETE_CHUNK + 40;
    await store.enqueue(Array.from({ length: 2 * n + 1 }, (_, i) => ({ queue: 'default', type: `b${i}` })));
    const stale = '00000000-0000-4000-8000-000000000000';
    // Fenced: one in the first statement's share, one in the last's; a token in upper case and a
    // lease given twice, as in a smaller batch.
    const outcomesOf = (held: LeasedJob[]) => [
      ...held.map((j, i) => ({
        id: j.id,
        leaseToken: i === 3 || i === n - 2 ? stale : i === 7 ? j.leaseToken.toUpperCase() : j.leaseToken,
        status: 'succeeded' as const,
      })),
      { ...lease(held[0]!), status: 'succeeded' as const },
    ];
    const expected = [...Array.from({ length: n }, (_, i) => i !== 3 && i !== n - 2), false];
    const check = async (held: LeasedJob[], written: boolean[]) => {
      expect(written).toEqual(expected);
      const statuses = await Promise.all([3, 7, n - 2, 0, n - 1].map(async (i) => (await row(held[i]!.id)).status));
      expect(statuses).toEqual(['running', 'succeeded', 'running', 'succeeded', 'succeeded']);
    };

    const first = await store.claim(opts(n));
    expect(first).toHaveLength(n);
    await check(first, await store.complete(outcomesOf(first)));

    const second = await store.claim(opts(n));
    expect(second).toHaveLength(n);
    const r = await store.completeAndClaim(outcomesOf(second), opts(5));
    await check(second, r.written);
    expect(r.jobs).toHaveLength(1);
  });

  it('a claimed job is the row as stored: status, holder and lease expiry filled in from the claim match it', async () => {
    await store.enqueue(Array.from({ length: 3 }, (_, i) => ({ queue: 'default', type: `s${i}`, payload: { i } })));
    // Without the lease token, a claimed job is exactly what a read of its row gives.
    const asStored = async (j: LeasedJob) => {
      const { leaseToken, ...job } = j;
      expect(leaseToken).toMatch(/^[0-9a-f-]{36}$/);
      expect(job).toEqual(await row(j.id));
    };
    const [first] = await store.claim({ ...opts(1), leaseMs: 12_345.4, start: false });
    await asStored(first!);
    expect(first).toMatchObject({ status: 'leased', leasedBy: 'w1' });
    expect(first!.leaseExpiresAt!.getTime() - first!.updatedAt.getTime()).toBe(12_346);
    const r = await store.completeAndClaim([{ ...lease(first!), status: 'succeeded' }], { ...opts(2), workerId: 'w2' });
    for (const j of r.jobs) await asStored(j);
    expect(r.jobs.map((j) => [j.status, j.leasedBy, j.leaseExpiresAt!.getTime() - j.updatedAt.getTime()])).toEqual([
      ['running', 'w2', LEASE],
      ['running', 'w2', LEASE],
    ]);
  });

  it('a lock key released by an outcome is claimable from the next round on, never twice held', async () => {
    await store.enqueue([
      { queue: 'default', type: 'k1', lockKey: 'K' },
      { queue: 'default', type: 'k2', lockKey: 'K' },
    ]);
    const [k1] = await store.claim(opts(4));
    expect(k1!.type).toBe('k1');
    const r = await store.completeAndClaim([{ ...lease(k1!), status: 'succeeded' }], opts(4));
    expect(r.written).toEqual([true]);
    // Same snapshot: K still looked held, so k2 waits for the following claim.
    expect(r.jobs).toEqual([]);
    expect((await store.claim(opts(4))).map((j) => j.type)).toEqual(['k2']);
  });

  it('no outcomes is a plain claim; bad input is INVALID_ARGUMENT with nothing written', async () => {
    await store.enqueue([{ queue: 'default', type: 'a' }]);
    const [a] = await store.claim(opts(1));
    await store.enqueue([{ queue: 'default', type: 'b' }]);
    const bad = [
      () => store.completeAndClaim([{ ...lease(a!), status: 'succeeded' }], { ...opts(1), limit: 0 }),
      () => store.completeAndClaim([{ ...lease(a!), status: 'retry_wait', error: 'x', retryDelayMs: -1 }], opts(1)),
      () => store.completeAndClaim([{ ...lease(a!), status: 'succeeded' }], { ...opts(1), queues: [] }),
    ];
    for (const call of bad) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isQError(err) && err.code === 'INVALID_ARGUMENT').toBe(true);
    }
    expect((await row(a!.id)).status).toBe('running');
    const { rows } = await store.pool.query(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'queued'`);
    expect(rows[0].n).toBe(1);
    const r = await store.completeAndClaim([], opts(3));
    expect(r.written).toEqual([]);
    expect(r.jobs.map((j) => j.type)).toEqual(['b']);
  });

  it('concurrent workers completing and claiming run each of 60 jobs exactly once, one key at a time', async () => {
    await store.enqueue(
      Array.from({ length: 60 }, (_, i) => ({ queue: 'default', type: 't', payload: { i }, ...(i % 3 === 0 ? { lockKey: 'shared' } : {}) })),
    );
    const ran: number[] = [];
    let maxShared = 0;
    const deadline = Date.now() + 40_000;
    await Promise.all(
      Array.from({ length: 4 }, async (_, w) => {
        let held: LeasedJob[] = [];
        let idleRounds = 0;
        while (Date.now() < deadline && idleRounds < 3) {
          const r = await store.completeAndClaim(
            held.map((j) => ({ ...lease(j), status: 'succeeded' as const })),
            opts(3, `w${w}`),
          );
          expect(r.written.every(Boolean)).toBe(true);
          const { rows } = await store.pool.query(
            `SELECT count(*)::int AS n FROM q_jobs_all WHERE lock_key = 'shared' AND status IN ('leased', 'running')`,
          );
          maxShared = Math.max(maxShared, rows[0].n);
          held = r.jobs;
          ran.push(...held.map((j) => (j.payload as { i: number }).i));
          idleRounds = held.length === 0 ? idleRounds + 1 : 0;
        }
      }),
    );
    expect(ran.sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i));
    expect(maxShared).toBeLessThanOrEqual(1);
    const { rows } = await store.pool.query(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'succeeded'`);
    expect(rows[0].n).toBe(60);
  });
});
