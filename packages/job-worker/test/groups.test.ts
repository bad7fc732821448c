// Groups in one worker process (#40): fairness (a cold group's job starts within a claim round
// behind a hot group's backlog, with and without limits), weights, and the worker's checks of
// its group options.
import { QErrorCode, isQError } from '@q/schema';
import type { JobStore } from '@q/store';
import { describe, expect, it } from 'vitest';
import { JobQueue, Scheduler, Worker, silentLogger, type WorkerOptions } from '../src/index.js';
import { upsertSchedule } from '../src/schedules.js';
import { useWorkerTests, waitFor } from './helpers.js';

let store: JobStore;
let queue: JobQueue;
let schemaDsn: () => string;
const { startWorker } = useWorkerTests('jwgroups', { concurrency: 10 }, (t) => {
  ({ store, queue } = t);
  schemaDsn = () => t.schema.dsn;
});

const HANDLER_MS = 50;

async function hotBacklog(n: number): Promise<void> {
  for (let i = 0; i < n; i += 2_000) {
    await queue.enqueueMany(Array.from({ length: Math.min(2_000, n - i) }, () => ({ type: 'work', group: 'hot', payload: {} })));
  }
}

describe('fairness', () => {
  // "Within a claim round" is counted in jobs, not ms: the hot jobs that start between the cold
  // job's enqueue and its start are those already claimed (the slots and the local queue) plus
  // one round's worth, whatever the machine's load; without fairness it is the whole backlog.
  // (The delay in ms, ≤ 2 × the handler time on a quiet machine, is the bench's job-groups-fair.)
  for (const limits of [undefined, [{ concurrency: 8 }]]) {
    it(`a cold group's job starts within a claim round behind 10,000 queued jobs of a hot group (${limits ? 'with' : 'without'} limits)`, async () => {
      await hotBacklog(10_000);
      const starts: Array<{ uuid: string; at: number }> = [];
      startWorker({ ...(limits ? { limits } : {}) }, (w) =>
        w.register('work', async (job) => {
          starts.push({ uuid: job.uuid, at: performance.now() });
          await new Promise((r) => setTimeout(r, HANDLER_MS));
        }),
      );
      await waitFor(() => starts.length >= 20, 10_000);
      const before = starts.length;
      const cold = await queue.enqueue({ type: 'work', group: 'cold', payload: {} });
      await waitFor(() => starts.some((s) => s.uuid === cold.uuid), 10_000);
      const passed = starts.findIndex((s) => s.uuid === cold.uuid) - before;
      expect(passed, `${passed} hot jobs started between the cold job's enqueue and its start`).toBeLessThanOrEqual(2 * 10);
    });
  }

  it('fairness: false runs the backlog in dequeue order', async () => {
    await hotBacklog(400);
    const order: string[] = [];
    startWorker({ fairness: false, concurrency: 4 }, (w) =>
      w.register('work', async (job) => {
        order.push(job.group ?? '');
        await new Promise((r) => setTimeout(r, 5));
      }),
    );
    await waitFor(() => order.length >= 8, 10_000);
    await queue.enqueue({ type: 'work', group: 'cold', payload: {} });
    await waitFor(() => order.length >= 120, 20_000);
    expect(order.slice(0, 120)).not.toContain('cold');
  });
});

describe('scheduled jobs', () => {
  it("are limited by their schedule's group: five backfilled slots of one group run one at a time", async () => {
    const start = new Date('2026-06-01T10:00:00.000Z');
    await upsertSchedule(store, { name: 'nightly', cron: '* * * * * *', type: 'work', group: 'tenant', backfill: { maxMs: 5_000 } }, start);
    const fired = await new Scheduler(store, { now: () => new Date('2026-06-01T10:00:05.500Z') }).tick();
    expect(fired).toMatchObject({ fired: ['nightly'], enqueued: 5 });
    expect(await queue.unschedule('nightly')).toBe(true);
    let running = 0;
    let peak = 0;
    let done = 0;
    const groups: Array<string | null> = [];
    startWorker({ concurrency: 4, limits: [{ concurrency: 1 }] }, (w) =>
      w.register('work', async (job) => {
        groups.push(job.group);
        peak = Math.max(peak, ++running);
        await new Promise((r) => setTimeout(r, 30));
        running--;
        done++;
      }),
    );
    await waitFor(() => done === 5, 10_000);
    expect(groups).toEqual(Array(5).fill('tenant'));
    expect(peak).toBe(1);
  });
});

describe('queue.work limits', () => {
  it('are per queue: the first call sets them, the same or none may follow, different ones are refused', async () => {
    const limits = [{ concurrency: 1 }];
    const q = await JobQueue.open(schemaDsn(), { maxConns: 4, migrate: false, logger: silentLogger });
    try {
      const seen: string[] = [];
      q.work('a', async (job) => void seen.push(job.group ?? ''), { queue: 'limited', limits });
      q.work('b', async () => undefined, { queue: 'limited', limits });
      q.work('c', async () => undefined, { queue: 'limited' });
      expect(() => q.work('d', async () => undefined, { queue: 'limited', limits: [{ concurrency: 2 }] })).toThrow(
        /limits must be the same for every type of queue "limited"/,
      );
      expect(() => q.work('e', async () => undefined, { queue: 'other', limits: [{ concurrency: -1 }] })).toThrow(
        /work: limits\[0\]: concurrency/,
      );
      const jobs = await q.enqueueMany([1, 2].map(() => ({ type: 'a', queue: 'limited', group: 'g' })));
      for (const j of jobs) await q.waitFor(j.uuid, { timeoutMs: 10_000 });
      expect(seen).toEqual(['g', 'g']);
    } finally {
      await q.close();
    }
  });
});

describe('options', () => {
  const bad: [Partial<WorkerOptions>, RegExp][] = [
    [{ limits: [{} as never] }, /Worker: limits\[0\] must have a concurrency or a rate/],
    [{ limits: [{ concurrency: 2.5 }] }, /concurrency must be an integer/],
    [{ limits: [{ rate: { limit: 1, windowMs: -1 } }] }, /rate\.windowMs must be an integer/],
    [{ fairness: 1 as never }, /Worker: fairness must be a boolean/],
    [{ weights: { a: 1.5 } }, /weights must be integers from 1/],
  ];
  for (const [opts, message] of bad) {
    it(`refuses ${JSON.stringify(opts)}`, () => {
      let err: unknown;
      try {
        new Worker(store, { queues: ['default'], concurrency: 1, ...opts });
      } catch (e) {
        err = e;
      }
      expect(isQError(err) && err.code === QErrorCode.INVALID_ARGUMENT).toBe(true);
      expect((err as Error).message).toMatch(message);
    });
  }
});
