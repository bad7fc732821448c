// ctx.snooze / JobSnoozeError and ctx.progress (#39) in a real worker, on real Postgres: a snooze
// uses no attempt, runs the job again after its delay, is bounded by maxSnoozes and fenced by the
// lease; progress is coalesced, written before the outcome, fenced, and survives a crash.
import { QError, QErrorCode } from '@q/schema';
import { JobStore, type Job } from '@q/store';
import type { TestSchema } from '@q/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { JobAbortedError, JobSnoozeError, Worker, type JobQueue } from '../src/index.js';
import { jobInStatus, memoryLogger, spawnWorker, useWorkerTests, waitFor, type WorkerProcess, lapseLease, leaseTakenOver } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let queue: JobQueue;
const { startWorker } = useWorkerTests('jsnooze', { concurrency: 2, leaseDurationMs: 60_000 }, (t) => ({ schema, store, queue } = t));
const children: WorkerProcess[] = [];
afterAll(() => {
  for (const c of children) c.child.kill('SIGKILL');
});

const statusOf = (uuid: string, status: Job['status']) => jobInStatus(store, uuid, status);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('snooze', () => {
  it('ctx.snooze puts the job back without using an attempt; it runs again after the delay', async () => {
    const job = await queue.enqueue({ type: 'later', maxAttempts: 1 });
    const runs: Array<{ attempt: number; at: number }> = [];
    const events: Array<{ delayMs: number; until: Date }> = [];
    startWorker({}, (w) => {
      w.on('job:snoozed', ({ delayMs, until }) => void events.push({ delayMs, until }));
      w.register('later', async (j, ctx) => {
        runs.push({ attempt: j.attempt, at: performance.now() });
        if (j.snoozes === 0) return ctx.snooze(400);
        return 'done';
      });
    });
    const done = await waitFor(statusOf(job.uuid, 'succeeded'), 20_000);
    // maxAttempts 1: a snooze that used the attempt would have left none for the second run.
    expect(runs.map((r) => r.attempt)).toEqual([1, 1]);
    expect(runs[1]!.at - runs[0]!.at).toBeGreaterThanOrEqual(390);
    expect(done).toMatchObject({ attempt: 1, snoozes: 1, result: 'done', lastError: null });
    expect(events).toHaveLength(1);
    expect(events[0]!.delayMs).toBe(400);
    expect(events[0]!.until).toBeInstanceOf(Date);
  });

  it('throwing JobSnoozeError snoozes too, and a snooze the handler swallows still counts', async () => {
    const thrown = await queue.enqueue({ type: 'thrown' });
    const swallowed = await queue.enqueue({ type: 'swallowed' });
    startWorker({}, (w) => {
      w.register('thrown', async (j) => {
        if (j.snoozes === 0) throw new JobSnoozeError(0);
        return j.attempt;
      });
      w.register('swallowed', async (j, ctx) => {
        if (j.snoozes === 0) {
          try {
            ctx.snooze(0);
          } catch {
            // a catch-all in the handler: the snooze was recorded before the throw
          }
          throw new Error('something else');
        }
        return j.attempt;
      });
    });
    expect(await waitFor(statusOf(thrown.uuid, 'succeeded'))).toMatchObject({ result: 1, snoozes: 1 });
    expect(await waitFor(statusOf(swallowed.uuid, 'succeeded'))).toMatchObject({ result: 1, snoozes: 1, lastError: null });
  });

  it('is bounded: past maxSnoozes the job is dead-lettered, saying so', async () => {
    const job = await queue.enqueue({ type: 'forever' });
    const errors: string[] = [];
    let runs = 0;
    startWorker({ maxSnoozes: 3 }, (w) => {
      w.on('job:dead-letter', ({ error }) => void errors.push(error));
      w.register('forever', async (_j, ctx) => {
        runs++;
        ctx.snooze(0);
      });
    });
    const dead = await waitFor(statusOf(job.uuid, 'dead_letter'));
    expect(runs).toBe(4);
    expect(dead).toMatchObject({ snoozes: 3, attempt: 1, lastError: 'snoozed more than 3 times' });
    await waitFor(async () => errors.length === 1);
    expect(errors).toEqual(['snoozed more than 3 times']);
  });

  it('is fenced once the lease was lost and the job taken over: nothing changes, reported as lease lost', async () => {
    const job = await queue.enqueue({ type: 'stale' });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const lost: string[] = [];
    const logs = memoryLogger();
    startWorker({ concurrency: 1, prefetch: 0, maintenanceIntervalMs: 60_000, workerId: 'old', logger: logs }, (w) => {
      w.on('job:lease-lost', ({ reason }) => void lost.push(reason));
      w.register('stale', async (_j, ctx) => {
        started();
        await held;
        ctx.snooze(1_000);
      });
    });
    await running;
    const fresh = await leaseTakenOver(store, job.uuid);
    expect(fresh!.uuid).toBe(job.uuid);
    const snapshot = await store.get(job.uuid);
    release();
    await waitFor(async () => lost.length > 0);
    expect(lost).toEqual(['fenced']);
    expect(await store.get(job.uuid)).toEqual(snapshot);
    expect(snapshot).toMatchObject({ status: 'leased', leasedBy: 'new', snoozes: 0 });
    expect(logs.lines.some((l) => l.level === 'warn' && /job snooze not recorded: the write was fenced/.test(l.msg ?? ''))).toBe(true);
  });

  it('a bad delay is INVALID_ARGUMENT in the handler; a bad maxSnoozes before the worker opens anything', async () => {
    const job = await queue.enqueue({ type: 'bad', maxAttempts: 1 });
    const seen: unknown[] = [];
    startWorker({}, (w) =>
      w.register('bad', async (_j, ctx) => {
        for (const ms of [-1, Number.NaN, Number.POSITIVE_INFINITY, 1e13]) {
          try {
            ctx.snooze(ms);
          } catch (err) {
            seen.push(err);
          }
        }
        try {
          new JobSnoozeError(-5);
        } catch (err) {
          seen.push(err);
        }
        return 'ran';
      }),
    );
    // None of the refused snoozes was recorded: the attempt succeeds.
    expect(await waitFor(statusOf(job.uuid, 'succeeded'))).toMatchObject({ result: 'ran', snoozes: 0 });
    expect(seen).toHaveLength(5);
    for (const err of seen) expect(err instanceof QError && err.code === QErrorCode.INVALID_ARGUMENT).toBe(true);
    for (const maxSnoozes of [-1, 1.5, Number.NaN, 2 ** 31]) {
      let err: unknown;
      try {
        new Worker(store, { queues: ['default'], concurrency: 1, maxSnoozes });
      } catch (e) {
        err = e;
      }
      expect(err instanceof QError && err.code === QErrorCode.INVALID_ARGUMENT && /maxSnoozes/.test(err.message)).toBe(true);
    }
  });
});

describe('progress', () => {
  it('coalesces a tight loop into a few writes, stores the last value before the outcome, and keeps it after success', async () => {
    const job = await queue.enqueue({ type: 'loop' });
    const real = store.updateProgress.bind(store);
    let writes = 0;
    store.updateProgress = (lease, value) => {
      writes++;
      return real(lease, value);
    };
    try {
      startWorker({}, (w) =>
        w.register('loop', async (_j, ctx) => {
          for (let i = 1; i <= 100; i++) {
            void ctx.progress({ done: i, of: 100 });
            if (i % 10 === 0) await sleep(60);
          }
          return 'ok';
        }),
      );
      const done = await waitFor(statusOf(job.uuid, 'succeeded'));
      expect(done.progress).toEqual({ done: 100, of: 100 });
      // About 600 ms of reporting: the first write at once, then one per 250 ms at most, then the last.
      expect(writes).toBeGreaterThanOrEqual(2);
      expect(writes).toBeLessThanOrEqual(5);
      const archived = await store.pool.query(`SELECT progress FROM q_jobs_archive WHERE uuid = $1`, [job.uuid]);
      expect(archived.rows).toEqual([{ progress: { done: 100, of: 100 } }]);
    } finally {
      store.updateProgress = real;
    }
  });

  it('resolves once durable, rejects a bad value at once, and is fenced after a lease loss', async () => {
    const job = await queue.enqueue({ type: 'fenced' });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let reported!: () => void;
    const durable = new Promise<void>((r) => (reported = r));
    let late: unknown;
    const refused: unknown[] = [];
    startWorker({ concurrency: 1, prefetch: 0, maintenanceIntervalMs: 60_000, workerId: 'old' }, (w) =>
      w.register('fenced', async (_j, ctx) => {
        for (const bad of [Number.NaN, 10n, { s: 'x'.repeat(9_000) }, undefined]) {
          try {
            await ctx.progress(bad);
          } catch (err) {
            refused.push(err);
          }
        }
        await ctx.progress(0.25);
        reported();
        await held;
        await sleep(300); // past the coalescing interval: the next write goes out at once
        try {
          await ctx.progress(0.5);
        } catch (err) {
          late = err;
        }
      }),
    );
    await durable;
    expect((await store.get(job.uuid))!.progress).toBe(0.25);
    expect(refused).toHaveLength(4);
    for (const err of refused) expect(err instanceof QError && err.code === QErrorCode.INVALID_ARGUMENT).toBe(true);
    const fresh = await leaseTakenOver(store, job.uuid);
    expect(fresh!.progress).toBe(0.25); // a new attempt can resume from it
    release();
    await waitFor(async () => late !== undefined);
    expect(late).toBeInstanceOf(JobAbortedError);
    expect((late as JobAbortedError).reason).toBe('lease_lost');
    expect((await store.get(job.uuid))!).toMatchObject({ progress: 0.25, leasedBy: 'new' });
  });

  it('survives a crash: a worker process SIGKILLed mid-job leaves its last progress in the row', async () => {
    const job = await queue.enqueue({ type: 'progress' });
    const p = await spawnWorker({ Q_DSN: schema.dsn, Q_WORKER_ID: 'crashy', Q_LEASE_MS: '60000' });
    children.push(p);
    await waitFor(() => p.output().includes(`progress ${job.uuid}`), 30_000);
    p.child.kill('SIGKILL');
    await p.exited;
    const row = (await store.get(job.uuid))!;
    expect(row).toMatchObject({ status: 'running', leasedBy: 'crashy', progress: { done: 3, of: 10 } });
    // Reaped as a crash: the progress stays for the next attempt.
    await lapseLease(store, job.uuid);
    expect((await store.get(job.uuid))!).toMatchObject({ status: 'retry_wait', progress: { done: 3, of: 10 } });
  });
});
