// Prefetch (a local queue of leased jobs ahead of the free slots), on real Postgres: exactly-once
// drain, immediate give-back on stop, cancel of a prefetched job, lock keys, sharing between workers.
import { JobStore, type Job } from '@q/store';
import { expect, it } from 'vitest';
import { Worker, type JobQueue } from '../src/index.js';
import { useWorkerTests, waitFor } from './helpers.js';

let store: JobStore;
let queue: JobQueue;
const { startWorker } = useWorkerTests('jprefetch', { concurrency: 4, prefetch: 50, leaseDurationMs: 30_000 }, (t) => ({ store, queue } = t));

const count = async (where: string): Promise<number> =>
  (await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE ${where}`)).rows[0]!.n;

/** A promise and its resolver, to hold handlers until the test lets them go. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

it('prefetch 50, concurrency 4: 500 jobs drain, each run exactly once, never more than 4 at once', async () => {
  const jobs = await queue.enqueueMany(Array.from({ length: 500 }, (_, i) => ({ type: 'count', payload: { i } })));
  const runs: string[] = [];
  let active = 0;
  let maxActive = 0;
  startWorker({}, (w) =>
    w.register('count', async (job) => {
      active++;
      maxActive = Math.max(maxActive, active);
      runs.push(job.uuid);
      if (runs.length % 50 === 0) await new Promise((r) => setTimeout(r, 1));
      active--;
    }),
  );
  await waitFor(async () => (await count(`status = 'succeeded'`)) === 500, 60_000);
  expect(runs.length).toBe(500);
  expect([...runs].sort()).toEqual(jobs.map((j) => j.uuid).sort());
  expect(maxActive).toBeLessThanOrEqual(4);
  expect(await count(`attempt <> 1`)).toBe(0);
});

it('abort with prefetched jobs: they are queued again at once with the attempt given back; running ones drain', async () => {
  await queue.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ type: 'held', payload: { i } })));
  const hold = gate();
  let started = 0;
  const r = startWorker({ concurrency: 2, prefetch: 20 }, (w) =>
    w.register('held', async () => {
      started++;
      await hold.promise;
    }),
  );
  // 2 running + 20 prefetched, all leased (as `running`) by this worker.
  await waitFor(async () => started === 2 && (await count(`lease_token IS NOT NULL`)) === 22);
  expect(await count(`status = 'queued' AND attempt = 0`)).toBe(8);
  r.ac.abort();
  await r.run;
  // Back at once — the lease is 30 s, so nothing here is a lapse — while the two handlers still run.
  await waitFor(async () => (await count(`status = 'queued' AND attempt = 0 AND lease_token IS NULL`)) === 28, 10_000);
  expect(await count(`status = 'running'`)).toBe(2);
  expect(started).toBe(2);
  hold.open();
  await r.worker.wait(10_000);
  expect(await count(`status = 'succeeded' AND attempt = 1`)).toBe(2);
  expect(await count(`status = 'queued' AND attempt = 0`)).toBe(28);
  expect(started).toBe(2);
});

it('wait(timeout) gives back prefetched and unfinished jobs alike', async () => {
  await queue.enqueueMany(Array.from({ length: 10 }, () => ({ type: 'stuck' })));
  let started = 0;
  const r = startWorker({ concurrency: 2, prefetch: 5 }, (w) =>
    w.register('stuck', (_job, { signal }) => {
      started++;
      return new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
    }),
  );
  await waitFor(async () => started === 2 && (await count(`lease_token IS NOT NULL`)) === 7);
  r.ac.abort();
  await r.run;
  await r.worker.wait(200);
  expect(await count(`status = 'queued' AND attempt = 0 AND lease_token IS NULL`)).toBe(10);
});

it('cancel of a prefetched job ends it cancelled without running its handler', async () => {
  const hold = gate();
  const ran: string[] = [];
  const jobs = await queue.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ type: 'p', payload: { i }, priority: 10 - i })));
  startWorker({ concurrency: 1, prefetch: 10 }, (w) =>
    w.register('p', async (job) => {
      ran.push(job.uuid);
      await hold.promise;
    }),
  );
  await waitFor(async () => ran.length === 1 && (await count(`lease_token IS NOT NULL`)) === 6);
  expect(ran).toEqual([jobs[0]!.uuid]);
  const victim = jobs[3]!;
  expect((await store.get(victim.uuid))?.status).toBe('running'); // prefetched: leased as running (documented)
  expect(await queue.cancel(victim.uuid)).toBe(true);
  const done = await waitFor(async () => {
    const j = await store.get(victim.uuid);
    return j?.status === 'cancelled' ? j : undefined;
  });
  expect(done.finishedAt).not.toBeNull();
  hold.open();
  await waitFor(async () => (await count(`status = 'succeeded'`)) === 5);
  expect(ran).not.toContain(victim.uuid);
  // Priority order held across the local queue.
  expect(ran).toEqual(jobs.filter((j) => j !== victim).map((j) => j.uuid));
});

it('lock keys: prefetch never runs two jobs of one key at once', async () => {
  await queue.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ type: 'locked', lockKey: `k${i % 2}` })));
  const active = new Map<string, number>();
  let clash = false;
  startWorker({ concurrency: 4, prefetch: 10 }, (w) =>
    w.register('locked', async (job: Job) => {
      const k = job.lockKey!;
      active.set(k, (active.get(k) ?? 0) + 1);
      if (active.get(k)! > 1) clash = true;
      await new Promise((r) => setTimeout(r, 2));
      active.set(k, active.get(k)! - 1);
    }),
  );
  await waitFor(async () => (await count(`status = 'succeeded'`)) === 20, 40_000);
  expect(clash).toBe(false);
});

it('two workers with prefetch 50 share 200 jobs: both run some, each job once', async () => {
  await queue.enqueueMany(Array.from({ length: 200 }, (_, i) => ({ type: 'share', payload: { i } })));
  const byWorker = new Map<string, number>();
  const seen = new Set<string>();
  let dup = false;
  for (const id of ['pa', 'pb']) {
    startWorker({ workerId: id, concurrency: 4, prefetch: 50 }, (w) =>
      w.register('share', async (job) => {
        if (seen.has(job.uuid)) dup = true;
        seen.add(job.uuid);
        byWorker.set(id, (byWorker.get(id) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, 5));
      }),
    );
  }
  await waitFor(async () => (await count(`status = 'succeeded'`)) === 200, 60_000);
  expect(dup).toBe(false);
  expect(seen.size).toBe(200);
  expect(byWorker.get('pa') ?? 0).toBeGreaterThan(0);
  expect(byWorker.get('pb') ?? 0).toBeGreaterThan(0);
});

it('prefetch must be a non-negative integer', () => {
  expect(() => new Worker(store, { queues: ['default'], concurrency: 1, prefetch: -1 })).toThrow(/prefetch/);
  expect(() => new Worker(store, { queues: ['default'], concurrency: 1, prefetch: 1.5 })).toThrow(/prefetch/);
});
