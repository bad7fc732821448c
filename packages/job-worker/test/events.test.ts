// Worker events (issue 39 item 5): each fires once, in order, with what it describes; a listener
// that throws or rejects is logged and never affects the job; `queue.work` exposes the same.
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { expect, it } from 'vitest';
import { JobQueue, Worker, type JobQueue as Queue, type WorkerEventMap, type WorkerFailure } from '../src/index.js';
import { jobInStatus, memoryLogger, useWorkerTests, waitFor, lapseLease } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let queue: Queue;
const { startWorker } = useWorkerTests('jwevents', { concurrency: 1 }, (t) => ({ schema, store, queue } = t));

/** Records every event of `w` as `[name, attempt or workerId, detail]`. */
function record(w: Worker | { on: Worker['on'] }): string[] {
  const seen: string[] = [];
  w.on('job:start', ({ job }) => void seen.push(`start ${job.attempt}`));
  w.on('job:retry', ({ job, error, retryDelayMs }) => void seen.push(`retry ${job.attempt} ${error} ${retryDelayMs >= 0}`));
  w.on('job:success', ({ job, result, durationMs }) => void seen.push(`success ${job.attempt} ${JSON.stringify(result)} ${durationMs >= 0}`));
  w.on('job:dead-letter', ({ job, error }) => void seen.push(`dead-letter ${job.attempt} ${error}`));
  w.on('job:lease-lost', ({ job, reason }) => void seen.push(`lease-lost ${job.attempt} ${reason}`));
  w.on('drained', () => void seen.push('drained'));
  return seen;
}

it('a job that fails twice then succeeds: start, retry, drained ×2, then start, success, drained — each once, in order', async () => {
  const logger = memoryLogger();
  let seen: string[] = [];
  let removedCalls = 0;
  const job = await queue.enqueue({ type: 'flaky', maxAttempts: 5 });
  startWorker({ retryBaseMs: 1, logger, workerId: 'ev' }, (w) => {
    seen = record(w);
    // Listeners that fail: each failure is logged once, and the job goes on as if they were not there.
    w.on('job:start', () => {
      throw new Error('listener throws');
    });
    w.on('job:retry', () => Promise.reject(new Error('listener rejects')));
    const off = w.on('job:success', () => void removedCalls++);
    off();
    off();
    w.register('flaky', async (j) => {
      if (j.attempt < 3) throw new Error(`no ${j.attempt}`);
      return { ok: j.attempt };
    });
  });
  await waitFor(jobInStatus(store, job.uuid, 'succeeded'));
  await waitFor(() => seen.length >= 9);
  expect(seen).toEqual([
    'start 1',
    'retry 1 no 1 true',
    'drained',
    'start 2',
    'retry 2 no 2 true',
    'drained',
    'start 3',
    'success 3 {"ok":3} true',
    'drained',
  ]);
  expect(removedCalls).toBe(0);
  const failed = logger.lines.filter((l) => /worker event listener/.test(l.msg ?? ''));
  expect(failed.map((l) => [l.level, l.msg, (l.fields as { err?: { message?: string } }).err?.message])).toEqual([
    ['warn', 'worker event listener for "job:start" threw', 'listener throws'],
    ['warn', 'worker event listener for "job:retry" threw', 'listener rejects'],
    ['warn', 'worker event listener for "job:start" threw', 'listener throws'],
    ['warn', 'worker event listener for "job:retry" threw', 'listener rejects'],
    ['warn', 'worker event listener for "job:start" threw', 'listener throws'],
  ]);
  expect(await store.get(job.uuid)).toMatchObject({ status: 'succeeded', attempt: 3, result: { ok: 3 } });
});

it('job:dead-letter fires once the dead letter is recorded', async () => {
  let seen: string[] = [];
  const job = await queue.enqueue({ type: 'doomed', maxAttempts: 1 });
  startWorker({}, (w) => {
    seen = record(w);
    w.register('doomed', async () => {
      throw new Error('gone');
    });
  });
  await waitFor(jobInStatus(store, job.uuid, 'dead_letter'));
  await waitFor(() => seen.includes('drained'));
  expect(seen).toEqual(['start 1', 'dead-letter 1 gone', 'drained']);
});

it('job:lease-lost from the outcome write: fenced (the job was reaped meanwhile), it fires once, and no outcome event', async () => {
  const a = await queue.enqueue({ type: 'held', payload: { n: 1 } });
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let seen: string[] = [];
  // A long lease: no renewal comes before the handler returns, so the outcome write learns it.
  startWorker({ leaseDurationMs: 60_000, maintenanceIntervalMs: 60_000 }, (w) => {
    seen = record(w);
    w.register('held', async () => {
      await gate;
      return 'late';
    });
  });
  await waitFor(() => seen.includes('start 1'));
  await lapseLease(store, a.uuid);
  release();
  await waitFor(() => seen.includes('drained'));
  expect(seen).toEqual(['start 1', 'lease-lost 1 fenced', 'drained']);
  expect(await store.get(a.uuid)).toMatchObject({ status: 'retry_wait', result: null });
});

it('job:lease-lost from a renewal: the lease keeper finds the token gone', async () => {
  const a = await queue.enqueue({ type: 'slow' });
  let seen: string[] = [];
  let aborted = false;
  // Renewals every 200 ms; maintenance (which would reclaim the job) stays out of the way.
  startWorker({ leaseDurationMs: 1_200, maintenanceIntervalMs: 60_000 }, (w) => {
    seen = record(w);
    w.register('slow', async (_j, { signal }) => {
      await new Promise<void>((r) => signal.addEventListener('abort', () => r()));
      aborted = true;
    });
  });
  await waitFor(() => seen.includes('start 1'));
  await lapseLease(store, a.uuid);
  await waitFor(() => seen.includes('drained'));
  expect(aborted).toBe(true);
  expect(seen).toEqual(['start 1', 'lease-lost 1 fenced', 'drained']);
});

it('error: each database failure is an event too, alongside onError', async () => {
  // A schema without the job tables: every claim fails (undefined table).
  const bare: TestSchema = await createTestSchema('jweventsbare');
  const own = await JobStore.open(bare.dsn, { maxConns: 2, migrate: false });
  try {
    const viaOption: WorkerFailure[] = [];
    const viaEvent: Array<WorkerEventMap['error']> = [];
    const w = new Worker(own, {
      queues: ['default'],
      concurrency: 1,
      logger: memoryLogger(),
      pollIntervalMs: 100,
      maintenanceIntervalMs: 60_000,
      maxPersistentFailures: 2,
      onError: (f) => {
        viaOption.push(f);
        throw new Error('onError throws');
      },
      schedules: false,
    });
    w.on('error', (f) => void viaEvent.push(f));
    await expect(w.run(new AbortController().signal)).rejects.toThrow(/worker stopped after 2 identical claim failures/);
    await w.wait(1_000);
    const claims = viaEvent.filter((f) => f.operation === 'claim');
    expect(claims.map((f) => [f.kind, f.count, f.fatal])).toEqual([
      ['persistent', 1, false],
      ['persistent', 2, true],
    ]);
    expect(viaEvent).toEqual(viaOption);
  } finally {
    await own.close();
    await bare.drop();
  }
});

it('queue.work returns the events of the queue worker; on() refuses an unknown event or a non-function', async () => {
  const opened = await JobQueue.open(schema.dsn, { maxConns: 2, logger: memoryLogger(), worker: { pollIntervalMs: 100 } });
  try {
    const events = opened.work('opened.job', async (j) => j.payload, { queue: 'evq' });
    const seen = record(events);
    const job = await opened.enqueue({ type: 'opened.job', queue: 'evq', payload: { a: 1 } });
    await waitFor(() => seen.includes('drained'));
    expect(seen).toEqual(['start 1', 'success 1 {"a":1} true', 'drained']);
    expect((await opened.get(job.uuid))?.status).toBe('succeeded');
    expect(() => events.on('job:finished' as 'job:start', () => {})).toThrow(/on: event must be one of job:start/);
    expect(() => events.on('job:start', 'x' as unknown as () => void)).toThrow(/listener must be a function/);
  } finally {
    await opened.close();
  }
});
