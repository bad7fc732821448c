// The worker's user-facing surface (issue 34 items 8, 13, 14, 15): option objects checked at
// construction, concurrency never coerced, honest log lines and metrics, a stopped managed worker
// that says so, and a default logger that is loud for what needs a human.
import type { Attributes } from '@opentelemetry/api';
import type { JobMetrics } from '@q/otel';
import { QError } from '@q/schema';
import { JobStore } from '@q/store';
import { createTestSchema, memoryLogger, thrownBy, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobQueue, Worker, type WorkerHealth, type WorkerStopped, type WorkerOptions } from '../src/index.js';
import { jobInStatus, waitFor } from './helpers.js';

const UNREACHABLE = 'postgres://q:secret@127.0.0.1:1/none';

function expectInvalid(err: unknown, message: RegExp): void {
  expect(err).toBeInstanceOf(QError);
  expect((err as QError).code).toBe('INVALID_ARGUMENT');
  expect((err as QError).message).toMatch(message);
}

/** Instruments that remember what was recorded (the shape `jobMetrics()` returns). */
function recordingMetrics() {
  const completed: Attributes[] = [];
  const counter = (into?: Attributes[]) => ({ add: (_n: number, attrs?: Attributes) => void into?.push(attrs ?? {}) });
  const metrics: JobMetrics = {
    completed: counter(completed),
    duration: { record: () => undefined },
    claimed: counter(),
    leaseLost: counter(),
  } as unknown as JobMetrics;
  return { metrics, completed };
}

describe('option objects are checked before anything runs (item 13)', () => {
  let store: JobStore;
  let schema: TestSchema;
  beforeAll(async () => {
    schema = await createTestSchema('jwsurf');
    store = await JobStore.open(schema.dsn, { maxConns: 2 });
  });
  afterAll(async () => {
    await store?.close();
    await schema?.drop();
  });

  const base: WorkerOptions = { queues: ['default'], concurrency: 1 };
  it.each([
    ['metrics: {}', { metrics: {} }, /Worker: metrics\.completed must be an object with add\(\)/],
    ['metrics without duration', { metrics: { completed: { add() {} }, claimed: { add() {} }, leaseLost: { add() {} } } }, /metrics\.duration/],
    ['metrics: 1', { metrics: 1 }, /Worker: metrics must be/],
    ['logger: {}', { logger: {} }, /Worker: logger must be an object with debug\(\), info\(\), warn\(\), error\(\)/],
    ['tracer: {}', { tracer: {} }, /Worker: tracer must be an object with startActiveSpan\(\)/],
    ['onError: "x"', { onError: 'x' }, /Worker: onError must be a function/],
    ['concurrency 0.5', { concurrency: 0.5 }, /Worker: concurrency must be an integer from 1 to 10000 \(got 0\.5\)/],
    ['concurrency 0', { concurrency: 0 }, /concurrency must be an integer from 1/],
    ['concurrency 2.7', { concurrency: 2.7 }, /concurrency must be an integer/],
    ['concurrency 1e6', { concurrency: 1e6 }, /concurrency must be an integer from 1 to 10000/],
  ])('new Worker with %s is INVALID_ARGUMENT at construction', (_name, bad, message) => {
    expectInvalid(
      thrownBy(() => new Worker(store, { ...base, ...(bad as Partial<WorkerOptions>) })),
      message,
    );
  });

  it.each([
    ['logger: {}', { logger: {} }, /JobQueue\.open: logger must be an object with debug\(\)/],
    ['tracerProvider: {}', { tracerProvider: {} }, /JobQueue\.open: tracerProvider must be an object with getTracer\(\)/],
    ['meterProvider: {}', { meterProvider: {} }, /JobQueue\.open: meterProvider must be an object with getMeter\(\)/],
    ['onWorkerStopped: 1', { onWorkerStopped: 1 }, /JobQueue\.open: onWorkerStopped must be a function/],
    ['worker.onError: 1', { worker: { onError: 1 } }, /JobQueue\.open: worker: onError must be a function/],
    ['worker.leaseDurationMs: -1', { worker: { leaseDurationMs: -1 } }, /JobQueue\.open: worker: .*leaseDurationMs/],
    ['worker.prefetch: "x"', { worker: { prefetch: 'x' } }, /JobQueue\.open: worker: prefetch/],
  ])('JobQueue.open with %s is INVALID_ARGUMENT before connecting', async (_name, bad, message) => {
    // An unreachable DSN: reaching it would be CONNECTION, so the check comes first.
    const err = await JobQueue.open(UNREACHABLE, bad as never).catch((e: unknown) => e);
    expectInvalid(err, message);
    expect((err as Error).message).not.toContain('secret');
  });

  it.each([
    ['tracerProvider: {}', { tracerProvider: {} }, /JobStore\.open: tracerProvider must be an object with getTracer\(\)/],
    ['meterProvider: 1', { meterProvider: 1 }, /JobStore\.open: meterProvider must be an object with getMeter\(\)/],
    ['options: null', null, /JobStore\.open: options must be an object/],
  ])('JobStore.open with %s is INVALID_ARGUMENT before connecting', async (_name, bad, message) => {
    expectInvalid(await JobStore.open(UNREACHABLE, bad as never).catch((e: unknown) => e), message);
  });
});

describe('a worker on a real table', () => {
  let schema: TestSchema;
  let store: JobStore;
  let admin: pg.Pool;
  beforeAll(async () => {
    schema = await createTestSchema('jwsurf2');
    store = await JobStore.open(schema.dsn, { maxConns: 4 });
    admin = new pg.Pool({ connectionString: schema.serverDsn, max: 2 });
  });
  afterAll(async () => {
    await store?.close();
    await admin?.end();
    await schema?.drop();
  });

  it('q.jobs.completed counts a run only once its outcome is written: a stale run (lease taken over) is not counted, nor logged as "lease lost?" (item 14)', async () => {
    const { metrics, completed } = recordingMetrics();
    const logger = memoryLogger();
    const [job] = await store.enqueue([{ queue: 'stale', type: 't' }]);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started = false;
    const worker = new Worker(store, {
      queues: ['stale'],
      concurrency: 1,
      metrics,
      logger,
      leaseDurationMs: 60_000,
      pollIntervalMs: 100,
      maintenanceIntervalMs: 60_000,
    });
    worker.register('t', async () => {
      started = true;
      await gate;
      return 'stale';
    });
    const ac = new AbortController();
    const run = worker.run(ac.signal);
    await waitFor(() => started || undefined, 10_000);
    // Another worker took the job over (its lease lapsed and was claimed again): the token changed.
    await admin.query(`UPDATE "${schema.name}".q_jobs SET lease_token = gen_random_uuid() WHERE id = $1`, [job!.id]);
    release();
    ac.abort();
    await run;
    await worker.wait(5_000);
    expect((await store.get(job!.uuid))?.status).toBe('running');
    expect(completed).toEqual([]);
    // The write was fenced: the log says what may have happened, not a guess.
    expect(logger.lines.filter((l) => (l.msg ?? '').includes('lease lost?'))).toEqual([]);
    expect(logger.lines.some((l) => l.level === 'warn' && /job outcome not recorded: .*fenced/.test(l.msg ?? ''))).toBe(true);

    // The same worker setup counts a run whose outcome is written.
    const [ok] = await store.enqueue([{ queue: 'stale', type: 'ok' }]);
    const w2 = new Worker(store, { queues: ['stale'], concurrency: 1, metrics, logger: memoryLogger(), pollIntervalMs: 100 });
    w2.register('ok', async () => 'fine');
    w2.register('t', async () => 'fine');
    const ac2 = new AbortController();
    const run2 = w2.run(ac2.signal);
    await waitFor(jobInStatus(store, ok!.uuid, 'succeeded'), 10_000);
    await waitFor(() => completed.length > 0 || undefined, 5_000);
    ac2.abort();
    await run2;
    await w2.wait(5_000);
    expect(completed).toContainEqual({ 'job.type': 'ok', 'job.status': 'succeeded' });
  });
});

describe('JobQueue.work on one queue (item 14)', () => {
  let schema: TestSchema;
  let queue: JobQueue | undefined;
  beforeAll(async () => {
    schema = await createTestSchema('jwsurf3');
  });
  afterAll(async () => {
    await queue?.close();
    await schema?.drop();
  });

  it('a second type with another concurrency names where the queue got its concurrency and what to do', async () => {
    queue = await JobQueue.open(schema.dsn, { maxConns: 2, logger: memoryLogger() });
    queue.work('a', async () => null);
    const err = thrownBy(() => queue!.work('b', async () => null, { concurrency: 4 }));
    expectInvalid(err, /concurrency 4 for type "b" conflicts with queue "default"'s concurrency 10, the default \(10\)/);
    expect((err as Error).message).toMatch(/concurrency is per queue/);
    expect((err as Error).message).toMatch(/work\("a"/);
    queue.work('c', async () => null, { queue: 'other', concurrency: 3 });
    const err2 = thrownBy(() => queue!.work('d', async () => null, { queue: 'other', concurrency: 5 }));
    expectInvalid(err2, /queue "other"'s concurrency 3, set by work\("c", …, \{ concurrency: 3 \}\)/);
    expectInvalid(
      thrownBy(() => queue!.work('e', async () => null, { queue: 'x', concurrency: 0.5 })),
      /concurrency must be a positive integer/,
    );
  });
});

describe('a JobQueue.open worker stopped by persistent failures (item 8)', () => {
  let schema: TestSchema;
  beforeAll(async () => {
    schema = await createTestSchema('jwsurf4');
  });
  afterAll(async () => {
    await schema?.drop();
  });

  it('is reported (onWorkerStopped, an error log, health()) and work() on its queue is refused', async () => {
    const logger = memoryLogger();
    const stopped: WorkerStopped[] = [];
    const queue = await JobQueue.open(schema.dsn, {
      maxConns: 3,
      logger,
      onWorkerStopped: (s) => stopped.push(s),
      worker: { pollIntervalMs: 100, maintenanceIntervalMs: 100, maxPersistentFailures: 2 },
    });
    try {
      let ran = 0;
      queue.work('t', async () => ran++);
      const job = await queue.enqueue({ type: 't' });
      await waitFor(async () => ((await queue.get(job.uuid))?.status === 'succeeded' ? true : undefined), 10_000);
      expect(queue.health()).toEqual([{ queue: 'default', state: 'running', types: ['t'] }] satisfies WorkerHealth[]);

      // A real persistent failure: the schema is dropped under the running worker.
      const admin = new pg.Pool({ connectionString: schema.serverDsn, max: 1 });
      await admin.query(`DROP SCHEMA "${schema.name}" CASCADE`);
      await admin.end();
      await waitFor(() => stopped.length > 0 || undefined, 30_000);
      expect(stopped).toHaveLength(1);
      expect(stopped[0]!.queue).toBe('default');
      expect(stopped[0]!.error).toBeInstanceOf(QError);
      expect(stopped[0]!.error.message).toMatch(/worker stopped after 2 identical/);
      const [health] = queue.health();
      expect(health).toMatchObject({ queue: 'default', state: 'stopped', types: ['t'] });
      expect(health!.error).toBe(stopped[0]!.error);
      expect(logger.lines.some((l) => l.level === 'error' && /queue "default" stopped and is not restarted/.test(l.msg ?? ''))).toBe(true);

      const err = thrownBy(() => queue.work('u', async () => null));
      expect(err).toBeInstanceOf(QError);
      expect((err as QError).code).toBe('INVALID_STATE');
      expect((err as QError).message).toMatch(/worker of queue "default" stopped on a persistent failure and is not restarted/);
      expect((err as QError).cause).toBe(stopped[0]!.error);
      // Another queue still gets a worker of its own.
      queue.work('v', async () => null, { queue: 'fresh' });
      expect(queue.health().find((h) => h.queue === 'fresh')?.state).toBe('running');
    } finally {
      await queue.close();
    }
  });
});
