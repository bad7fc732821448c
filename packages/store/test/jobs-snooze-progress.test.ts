// JobStore.snooze and JobStore.updateProgress (#39): a snooze puts the job back to wait without
// using an attempt, bounded and fenced by the lease token; progress is a small JSON value stored
// under the lease, kept across attempts and into the archive — on real Postgres.
import { QErrorCode, isQError } from '@q/schema';
import { useJobStore } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { JobStore, MAX_PROGRESS_BYTES, type LeasedJob } from '../src/index.js';

let store: JobStore;
const LEASE = 30_000;

useJobStore(JobStore, { prefix: 'jsnz', maxConns: 4, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] }, (t) => ({ store } = t));

const claim = async (workerId = 'w1'): Promise<LeasedJob> => {
  const [job] = await store.claim({ queues: ['default'], workerId, limit: 1, leaseMs: LEASE });
  if (!job) throw new Error('nothing claimed');
  return job;
};
const lease = (j: LeasedJob) => ({ id: j.id, leaseToken: j.leaseToken });

/** Lets the job's lease lapse and reaps it, so another worker can claim it. */
async function loseLease(id: number): Promise<void> {
  await store.pool.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [id]);
  await store.reapExpired();
  await store.pool.query(`UPDATE q_jobs SET run_at = now() WHERE id = $1`, [id]);
  await store.promoteDue();
}

async function expectInvalid(p: Promise<unknown>): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isQError(err) && err.code === QErrorCode.INVALID_ARGUMENT).toBe(true);
}

describe('snooze', () => {
  it('puts the job back to wait until now + delay, gives the attempt back and counts the snooze', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const first = await claim();
    expect(first.attempt).toBe(1);
    const before = await store.now();
    const r = await store.snooze(lease(first), 60_000);
    expect(r.status).toBe('snoozed');
    expect(r.snoozes).toBe(1);
    expect(r.runAt!.getTime() - before.getTime()).toBeGreaterThanOrEqual(59_000);
    const row = (await store.getById(job!.id))!;
    expect(row).toMatchObject({ status: 'scheduled', attempt: 0, snoozes: 1, leasedBy: null, leaseExpiresAt: null });
    // Not claimable before its time; claimable once due, with the attempt count it had.
    expect(await store.claim({ queues: ['default'], workerId: 'w1', limit: 1, leaseMs: LEASE })).toEqual([]);
    await store.pool.query(`UPDATE q_jobs SET run_at = now() WHERE id = $1`, [job!.id]);
    await store.promoteDue();
    const again = await claim();
    expect(again).toMatchObject({ id: job!.id, attempt: 1, snoozes: 1 });
  });

  it('a zero delay queues the job at once', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const r = await store.snooze(lease(await claim()), 0);
    expect(r.status).toBe('snoozed');
    expect((await store.getById(job!.id))!.status).toBe('queued');
    expect((await claim()).attempt).toBe(1);
  });

  it('dead-letters a job snoozed more than maxSnoozes times, keeping its attempt', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    for (let i = 1; i <= 2; i++) {
      const r = await store.snooze(lease(await claim()), 0, 2);
      expect(r).toMatchObject({ status: 'snoozed', snoozes: i });
    }
    const r = await store.snooze(lease(await claim()), 0, 2);
    expect(r).toEqual({ status: 'dead_letter', runAt: null, snoozes: 2 });
    const row = (await store.getById(job!.id))!;
    expect(row).toMatchObject({ status: 'dead_letter', attempt: 1, snoozes: 2, lastError: 'snoozed more than 2 times' });
    expect(row.deadLetteredAt).not.toBeNull();
    const archived = await store.pool.query(`SELECT snoozes FROM q_jobs_archive WHERE id = $1`, [job!.id]);
    expect(archived.rows).toEqual([{ snoozes: 2 }]);
  });

  it('maxSnoozes 0 dead-letters the first snooze', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    expect((await store.snooze(lease(await claim()), 10, 0)).status).toBe('dead_letter');
    expect((await store.getById(job!.id))!.lastError).toBe('snoozed more than 0 times');
  });

  it('is fenced once the lease was lost and the job reclaimed: nothing changes', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const stale = await claim('w1');
    await loseLease(job!.id);
    const fresh = await claim('w2');
    expect(fresh.leaseToken).not.toBe(stale.leaseToken);
    expect(await store.snooze(lease(stale), 60_000)).toEqual({ status: 'fenced', runAt: null, snoozes: null });
    expect((await store.getById(job!.id))!).toMatchObject({ status: 'leased', leasedBy: 'w2', snoozes: 0 });
  });

  it('a requested cancel wins over the snooze', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const held = await claim();
    await store.cancel(job!.uuid);
    expect((await store.snooze(lease(held), 1_000)).status).toBe('cancelled');
    expect((await store.getById(job!.id))!.status).toBe('cancelled');
  });

  it('refuses a bad delay or bound with INVALID_ARGUMENT, writing nothing', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const held = lease(await claim());
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, 101 * 365.25 * 86_400_000]) {
      await expectInvalid(store.snooze(held, bad));
    }
    for (const bad of [-1, 1.5, Number.NaN, 2 ** 31]) await expectInvalid(store.snooze(held, 0, bad));
    expect((await store.getById(job!.id))!).toMatchObject({ status: 'leased', snoozes: 0 });
  });
});

describe('updateProgress', () => {
  it('stores a number or a JSON value under the lease; get() and list() show it', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    expect(job!.progress).toBeNull();
    const held = lease(await claim());
    expect(await store.updateProgress(held, 0.5)).toBe(true);
    expect((await store.getById(job!.id))!.progress).toBe(0.5);
    expect(await store.updateProgress(held, { done: 3, of: 10 })).toBe(true);
    expect((await store.get(job!.uuid))!.progress).toEqual({ done: 3, of: 10 });
    const page = await store.list({});
    expect(page.jobs.find((j) => j.id === job!.id)!.progress).toEqual({ done: 3, of: 10 });
  });

  it('keeps the progress after success (archived) and across attempts', async () => {
    const [a, b] = await store.enqueue([
      { queue: 'default', type: 't', priority: 1 },
      { queue: 'default', type: 't' },
    ]);
    const ha = await claim();
    await store.updateProgress(lease(ha), 100);
    expect(await store.succeed(lease(ha), 'ok')).toBe(true);
    expect((await store.getById(a!.id))!).toMatchObject({ status: 'succeeded', progress: 100 });
    const hb = await claim();
    await store.updateProgress(lease(hb), { step: 2 });
    await store.fail(lease(hb), 'boom', 0);
    await store.pool.query(`UPDATE q_jobs SET run_at = now() WHERE id = $1`, [b!.id]);
    await store.promoteDue();
    expect((await claim()).progress).toEqual({ step: 2 });
  });

  it('is fenced once the lease was lost and the job reclaimed', async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const stale = await claim('w1');
    expect(await store.updateProgress(lease(stale), 1)).toBe(true);
    await loseLease(job!.id);
    const fresh = await claim('w2');
    expect(await store.updateProgress(lease(stale), 2)).toBe(false);
    expect(await store.updateProgress(lease(fresh), 3)).toBe(true);
    expect((await store.getById(job!.id))!.progress).toBe(3);
  });

  it(`refuses what JSON cannot carry as is, and values over ${MAX_PROGRESS_BYTES} bytes`, async () => {
    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    const held = lease(await claim());
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, undefined, 10n, cycle, new Map(), { s: 'x'.repeat(MAX_PROGRESS_BYTES) }]) {
      await expectInvalid(store.updateProgress(held, bad));
    }
    expect(await store.updateProgress(held, 'x'.repeat(MAX_PROGRESS_BYTES - 2))).toBe(true);
    expect(await store.updateProgress(held, null)).toBe(true);
    expect((await store.getById(job!.id))!.progress).toBeNull();
  });
});
