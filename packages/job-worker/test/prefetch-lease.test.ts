// A prefetched job whose lease ran out while the worker could not run (an event-loop block longer
// than the lease had left) is never started: it goes back to the queue, and a second worker that
// reaped the lapsed leases runs each job exactly once, never two at once.
import type { JobStore } from '@q/store';
import { expect, it } from 'vitest';
import type { JobQueue } from '../src/index.js';
import { useWorkerTests, waitFor } from './helpers.js';

let store: JobStore;
let queue: JobQueue;
const { startWorker } = useWorkerTests('jprefetchlease', { concurrency: 1, prefetch: 4, leaseDurationMs: 1_000 }, (t) => ({ store, queue } = t));

const count = async (where: string): Promise<number> =>
  (await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE ${where}`)).rows[0]!.n;

it('an event-loop block past the lease with a full local queue: no prefetched job starts on a lapsed lease, none runs twice', async () => {
  // The blocking job goes first (priority) on a queue only the first worker serves.
  await queue.enqueue({ queue: 'maintenance', type: 'block', priority: 10 });
  const work = await queue.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ type: 'work', payload: { i } })));
  let release!: () => void;
  const go = new Promise<void>((r) => (release = r));
  let blocking = false;
  const runs: Array<{ uuid: string; by: string; start: number; end: number; lapsed: boolean }> = [];
  const work$ = (by: string) => async (job: { id: number; uuid: string; leaseToken?: string }) => {
    const start = Date.now();
    // Whether the database still held this attempt's lease when its handler started.
    const { rows } = await store.pool.query<{ held: boolean }>(
      `SELECT lease_expires_at > now() AS held FROM q_jobs WHERE id = $1 AND lease_token = $2`,
      [job.id, job.leaseToken],
    );
    await new Promise((r) => setTimeout(r, 300));
    runs.push({ uuid: job.uuid, by, start, end: Date.now(), lapsed: rows[0]?.held !== true });
  };
  startWorker({ queues: ['maintenance', 'default'] }, (w) => {
    w.register('block', async () => {
      // Once: its own lease lapses too, and a second block would stall the other worker as well.
      if (blocking) return;
      blocking = true;
      await go;
      // Blocks the event loop for 1.5 leases: nothing renews, the prefetched leases lapse.
      const until = Date.now() + 1_500;
      while (Date.now() < until);
    });
    w.register('work', work$('a'));
  });
  // The first worker runs the blocking job and holds the four others in its local queue.
  await waitFor(async () => blocking && (await count(`lease_token IS NOT NULL`)) === 5);
  startWorker({ concurrency: 4, prefetch: 0, workerId: 'b' }, (w) => w.register('work', work$('b')));
  release();
  await waitFor(async () => (await count(`job_type = 'work' AND status = 'succeeded'`)) === 4, 30_000);
  await waitFor(() => runs.length >= 4);
  await new Promise((r) => setTimeout(r, 500)); // a late duplicate would show here
  expect(runs.filter((r) => r.lapsed)).toEqual([]);
  expect(runs.map((r) => r.uuid).sort()).toEqual(work.map((j) => j.uuid).sort());
  expect(await count(`job_type = 'work' AND attempt <> 1`)).toBe(0);
});
