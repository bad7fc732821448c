// The worker's steady state: finished attempts' outcomes ride along with the claim of their
// replacements (one statement per batch), without ever holding more jobs than free slots.
import { JobStore } from '@q/store';
import { memoryLogger, runWorkerUntil, sleep, useJobStore } from '@q/testing';
import { expect, it } from 'vitest';
import { JobQueue, Worker } from '../src/index.js';

let store: JobStore;

useJobStore(JobStore, { prefix: 'jw_rt', maxConns: 6 }, (t) => ({ store } = t));

/** Runs `worker` until `done()` holds, then stops it, waits for it, and calls `restore`. */
async function runUntil(worker: Worker, done: () => Promise<boolean>, restore: () => void): Promise<void> {
  try {
    await runWorkerUntil(worker, done, { timeoutMs: 60_000, drainMs: 5_000 });
  } finally {
    restore();
  }
}

/** Whether all `n` jobs of `type` have succeeded. */
async function allSucceeded(type: string, n: number): Promise<boolean> {
  const { rows } = await store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM q_jobs_all WHERE job_type = $1 AND status = 'succeeded'`,
    [type],
  );
  return rows[0]!.n === n;
}

/** Every one of the `n` jobs ran, each exactly once. */
function expectEachOnce(seen: ReadonlyMap<number, number>, n: number): void {
  expect(seen.size).toBe(n);
  expect([...seen.values()].every((c) => c === 1)).toBe(true);
}

it('a drain completes and claims in one round trip per batch; every job runs once; never more held than slots', async () => {
  const n = 120;
  const concurrency = 4;
  const queue = new JobQueue(store, { knownQueues: ['default'] });
  await queue.enqueueMany(Array.from({ length: n }, (_, i) => ({ type: 'noop', payload: { i } })));

  // Count the store calls the worker makes (the statements themselves run on real Postgres).
  const calls = { claim: 0, complete: 0, completeAndClaim: 0, combinedOutcomes: 0 };
  const s = store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  const originals = { claim: s.claim!, complete: s.complete!, completeAndClaim: s.completeAndClaim! };
  s.claim = (...a) => (calls.claim++, originals.claim.apply(store, a));
  s.complete = (...a) => (calls.complete++, originals.complete.apply(store, a));
  s.completeAndClaim = (...a) => {
    calls.completeAndClaim++;
    calls.combinedOutcomes += (a[0] as unknown[]).length;
    return originals.completeAndClaim.apply(store, a);
  };

  const seen = new Map<number, number>();
  let maxHeld = 0;
  // prefetch 0: claims only for free slots (the default local queue holds more, see prefetch.test.ts).
  const worker = new Worker(store, { queues: ['default'], concurrency, prefetch: 0, pollIntervalMs: 100, maintenanceIntervalMs: 60_000 });
  worker.register('noop', async (job) => {
    const i = (job.payload as { i: number }).i;
    seen.set(i, (seen.get(i) ?? 0) + 1);
    const { rows } = await store.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM q_jobs_all WHERE leased_by = $1 AND status IN ('leased', 'running')`,
      [worker.id],
    );
    maxHeld = Math.max(maxHeld, rows[0]!.n);
    return null;
  });
  await runUntil(
    worker,
    async () => {
      const { rows } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'succeeded'`);
      return rows[0]!.n === n;
    },
    () => Object.assign(s, originals),
  );
  expectEachOnce(seen, n);
  expect(maxHeld).toBeLessThanOrEqual(concurrency);
  // Most outcomes were written together with the next claim, not by a completion of their own.
  expect(calls.completeAndClaim).toBeGreaterThan(0);
  expect(calls.combinedOutcomes).toBeGreaterThan(n / 2);
});

it('with a local queue two round trips run side by side (each job still once); without one, never two', async () => {
  const queue = new JobQueue(store, { knownQueues: ['default'] });
  const s = store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  const originals = { claim: s.claim!, complete: s.complete!, completeAndClaim: s.completeAndClaim! };
  const drain = async (prefetch: number, n: number) => {
    await queue.enqueueMany(Array.from({ length: n }, (_, i) => ({ type: 'noop', payload: { i } })));
    let inFlight = 0;
    let maxInFlight = 0;
    for (const m of ['claim', 'complete', 'completeAndClaim'] as const) {
      s[m] = async (...a) => {
        maxInFlight = Math.max(maxInFlight, ++inFlight);
        try {
          return await originals[m].apply(store, a);
        } finally {
          inFlight--;
        }
      };
    }
    const seen = new Map<number, number>();
    const worker = new Worker(store, { queues: ['default'], concurrency: 4, prefetch, pollIntervalMs: 100, maintenanceIntervalMs: 60_000 });
    worker.register('noop', async (job) => {
      const i = (job.payload as { i: number }).i;
      seen.set(i, (seen.get(i) ?? 0) + 1);
      return null;
    });
    await runUntil(
      worker,
      async () => {
        const { rows } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status <> 'succeeded'`);
        return rows[0]!.n === 0 && seen.size === n;
      },
      () => Object.assign(s, originals),
    );
    expectEachOnce(seen, n);
    return maxInFlight;
  };
  expect(await drain(64, 2_000)).toBe(2);
  expect(await drain(0, 200)).toBe(1);
});

it('a short round trip that wrote outcomes is followed by one more look: jobs of one lock key run back to back, not a poll apart', async () => {
  const queue = new JobQueue(store, { knownQueues: ['default'] });
  // Each job's claim comes back short: the outcome it carried released the lock key only in its own
  // snapshot. The look after it finds the next job; a loop that idled instead would wait out the poll.
  const n = 4;
  await queue.enqueueMany(Array.from({ length: n }, (_, i) => ({ type: 'locked', lockKey: 'one', payload: { i } })));
  const seen = new Map<number, number>();
  const worker = new Worker(store, { queues: ['default'], concurrency: 1, prefetch: 0, pollIntervalMs: 60_000, maintenanceIntervalMs: 60_000 });
  worker.register('locked', async (job) => {
    const i = (job.payload as { i: number }).i;
    seen.set(i, (seen.get(i) ?? 0) + 1);
    return null;
  });
  const started = performance.now();
  await runWorkerUntil(worker, () => allSucceeded('locked', n), { timeoutMs: 30_000, drainMs: 5_000 });
  expectEachOnce(seen, n);
  expect(performance.now() - started).toBeLessThan(10_000);
});

it('after a round trip carrying outcomes fails, the next one claims alone while the outcomes are written on their own', async () => {
  const queue = new JobQueue(store, { knownQueues: ['default'] });
  const n = 10;
  await queue.enqueueMany(Array.from({ length: n }, (_, i) => ({ type: 'after-fail', payload: { i } })));
  const s = store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  const originals = { claim: s.claim!, complete: s.complete!, completeAndClaim: s.completeAndClaim! };
  // The store calls in order; the first combined round trip fails before reaching the database.
  const calls: string[] = [];
  let failed = false;
  s.claim = (...a) => (calls.push('claim'), originals.claim.apply(store, a));
  s.complete = (...a) => (calls.push('complete'), originals.complete.apply(store, a));
  s.completeAndClaim = (...a) => {
    calls.push('completeAndClaim');
    if (!failed) {
      failed = true;
      // Fails late, once the other slot's job has finished: its outcome waits when the next trip is sent.
      return sleep(250).then(() => Promise.reject(Object.assign(new Error('injected: the combined statement failed'), { code: '57014' })));
    }
    return originals.completeAndClaim.apply(store, a);
  };
  const seen = new Map<number, number>();
  const logs = memoryLogger();
  const worker = new Worker(store, {
    queues: ['default'],
    concurrency: 2,
    prefetch: 0,
    pollIntervalMs: 100,
    maintenanceIntervalMs: 60_000,
    logger: logs,
  });
  worker.register('after-fail', async (job) => {
    const i = (job.payload as { i: number }).i;
    seen.set(i, (seen.get(i) ?? 0) + 1);
    // The first two run side by side; the second ends while the first one's round trip is failing.
    await sleep(i === 1 ? 120 : 5);
    return null;
  });
  await runUntil(
    worker,
    () => allSucceeded('after-fail', n),
    () => Object.assign(s, originals),
  );
  expectEachOnce(seen, n);
  const failedAt = calls.indexOf('completeAndClaim');
  expect(failedAt).toBeGreaterThanOrEqual(0);
  // The failed trip's outcomes are written by a completion of their own; the next round trip sent is a claim alone.
  const after = calls.slice(failedAt + 1);
  expect(after).toContain('complete');
  expect(after.find((c) => c !== 'complete')).toBe('claim');
  expect(logs.lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual(['complete-and-claim failed, writing outcomes alone']);
});
