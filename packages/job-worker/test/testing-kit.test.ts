// The test kit (issue 39 item 8), `@q/job-worker/testing`: drain runs every due job of a queue
// in-process (retries included) and returns what became of each; assertEnqueued finds a job by
// type and payload; runHandler runs one handler with a fake context.
import { AssertionError } from 'node:assert';
import { QError, QErrorCode } from '@q/schema';
import type { JobStore } from '@q/store';
import type { TestSchema } from '@q/testing';
import { afterEach, expect, it } from 'vitest';
import { DeadLetterError, JobQueue, JobSnoozeError, defineJob, silentLogger, type StandardSchemaV1 } from '../src/index.js';
import { assertEnqueued, drain, runHandler } from '../src/testing.js';
import { useWorkerTests } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let producer: JobQueue;
useWorkerTests('jwkit', { concurrency: 1 }, (t) => ({ schema, store, queue: producer } = t));

const opened: JobQueue[] = [];
afterEach(async () => {
  for (const q of opened.splice(0)) await q.close();
});

async function testQueue(): Promise<JobQueue> {
  const q = await JobQueue.open(schema.dsn, { maxConns: 3, logger: silentLogger, startWorkers: false });
  opened.push(q);
  return q;
}

it('drain runs every due job with its retries at once, and returns each outcome in start order', async () => {
  const queue = await testQueue();
  const started: string[] = [];
  queue.work('flaky', async (job) => {
    if (job.attempt < 3) throw new Error(`attempt ${job.attempt} fails`);
    return { done: job.attempt };
  });
  queue.work('doomed', async () => {
    throw new Error('always');
  });
  const events = queue.work('fine', async (job) => job.payload);
  events.on('job:start', ({ job }) => void started.push(job.type));
  const flaky = await queue.enqueue({ type: 'flaky', payload: { n: 1 } });
  const doomed = await queue.enqueue({ type: 'doomed', maxAttempts: 2 });
  const fine = await queue.enqueue({ type: 'fine', payload: { x: 1 } });
  const later = await queue.enqueue({ type: 'fine', runAt: new Date(Date.now() + 3_600_000) });
  const orphan = await queue.enqueue({ type: 'unregistered', maxAttempts: 2 });

  const t0 = Date.now();
  const outcomes = await drain(queue);
  expect(Date.now() - t0).toBeLessThan(10_000); // the retries' backoff (5 s and up) was not waited out
  expect(outcomes).toEqual([
    {
      uuid: flaky.uuid,
      id: flaky.id,
      type: 'flaky',
      queue: 'default',
      payload: { n: 1 },
      status: 'succeeded',
      attempts: 3,
      result: { done: 3 },
      errors: ['attempt 1 fails', 'attempt 2 fails'],
    },
    {
      uuid: doomed.uuid,
      id: doomed.id,
      type: 'doomed',
      queue: 'default',
      payload: {},
      status: 'dead_letter',
      attempts: 2,
      errors: ['always', 'always'],
    },
    {
      uuid: fine.uuid,
      id: fine.id,
      type: 'fine',
      queue: 'default',
      payload: { x: 1 },
      status: 'succeeded',
      attempts: 1,
      result: { x: 1 },
      errors: [],
    },
    {
      uuid: orphan.uuid,
      id: orphan.id,
      type: 'unregistered',
      queue: 'default',
      payload: {},
      status: 'dead_letter',
      attempts: 2,
      errors: ['no handler registered for job type "unregistered"', 'no handler registered for job type "unregistered"'],
    },
  ]);
  // The listener given to what work returned heard the drain's workers.
  expect(started.filter((t) => t === 'fine')).toEqual(['fine']);
  expect(await store.get(flaky.uuid)).toMatchObject({ status: 'succeeded', attempt: 3 });
  expect(await store.get(later.uuid)).toMatchObject({ status: 'scheduled', attempt: 0 });
  // Nothing is due now: a second drain runs nothing.
  expect(await drain(queue)).toEqual([]);
});

it('with { startWorkers: false } no job runs until drained; runRetries: false leaves a failure in retry_wait; until stops early', async () => {
  const queue = await testQueue();
  queue.work('fails', async () => {
    throw new Error('nope');
  });
  queue.work('ok', async () => 'ok');
  const a = await queue.enqueue({ type: 'fails' });
  await new Promise((r) => setTimeout(r, 300));
  expect((await store.get(a.uuid))?.status).toBe('queued');

  const once = await drain(queue, { runRetries: false });
  expect(once.map((o) => [o.type, o.status, o.attempts, o.errors])).toEqual([['fails', 'retry_wait', 1, ['nope']]]);
  expect((await store.get(a.uuid))?.status).toBe('retry_wait');

  await queue.enqueueMany([{ type: 'ok' }, { type: 'ok' }, { type: 'ok' }]);
  const first = await drain(queue, { until: (o) => o.status === 'succeeded' });
  expect(first.map((o) => [o.type, o.status])).toEqual([['ok', 'succeeded']]);
  expect((await store.backlog()).filter((b) => b.status === 'queued')).toEqual([{ queue: 'default', status: 'queued', count: 2 }]);
});

it('drain refuses a queue whose workers run (or that runs none), and bad options', async () => {
  const running = await JobQueue.open(schema.dsn, { maxConns: 2, logger: silentLogger });
  opened.push(running);
  for (const q of [running, producer]) {
    const err = await drain(q).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QError);
    expect((err as QError).code).toBe(QErrorCode.INVALID_STATE);
    expect((err as QError).message).toMatch(/startWorkers: false/);
  }
  const queue = await testQueue();
  await expect(drain(queue, { concurrency: 0 })).rejects.toThrow('drain: concurrency must be a positive integer');
  await expect(JobQueue.open(schema.dsn, { startWorkers: 'no' as unknown as boolean })).rejects.toThrow(
    'JobQueue.open: startWorkers must be a boolean',
  );
});

it('assertEnqueued finds a job by type and payload subset, and says what it found when none matches', async () => {
  const queue = await testQueue();
  const welcome = defineJob<{ to: string; locale: string }>({ type: 'email.welcome' });
  await welcome.enqueue(queue, { to: 'a@example.com', locale: 'en' });
  const job = await assertEnqueued(queue, { type: welcome, payload: { to: 'a@example.com' } });
  expect(job.payload).toEqual({ to: 'a@example.com', locale: 'en' });
  await expect(assertEnqueued(queue, { type: 'email.welcome', status: 'queued' })).resolves.toMatchObject({ type: 'email.welcome' });
  const err = await assertEnqueued(queue, { type: 'email.welcome', payload: { to: 'b@example.com' } }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(AssertionError);
  expect((err as Error).message).toBe(
    'expected a job of type "email.welcome" with payload matching {"to":"b@example.com"}, found 1: queued {"to":"a@example.com","locale":"en"}',
  );
  await expect(assertEnqueued(queue, { type: 'other' })).rejects.toThrow('expected a job of type "other", none was found');
});

it('runHandler runs one handler with a fake context: result and steps, a failure and whether it dead-letters, a schema refusal', async () => {
  const ok = await runHandler(
    async (job: { payload: { n: number } }, { steps, signal }) => {
      await steps.start('double');
      await steps.succeed();
      return { n: job.payload.n * 2, aborted: signal.aborted };
    },
    { n: 21 },
  );
  expect(ok).toMatchObject({ status: 'succeeded', result: { n: 42, aborted: false } });
  expect(ok.steps.map((s) => [s.name, s.status])).toEqual([['double', 'succeeded']]);

  const gone = await runHandler(
    async (job) => {
      throw new DeadLetterError(`no such user ${String((job.payload as { id: number }).id)} (attempt ${job.attempt})`);
    },
    { id: 7 },
    { job: { attempt: 3 } },
  );
  expect(gone).toMatchObject({ status: 'failed', deadLetter: true });
  expect((gone as { error: Error }).error.message).toBe('no such user 7 (attempt 3)');

  const positive: StandardSchemaV1<{ n: number }> = {
    '~standard': {
      version: 1,
      vendor: 'test',
      validate: (v) => ((v as { n: number }).n > 0 ? { value: v as { n: number } } : { issues: [{ message: 'must be > 0', path: ['n'] }] }),
    },
  };
  const def = defineJob<{ n: number }, number>({ type: 'count', schema: positive });
  const refused = await runHandler(
    def.handler(async (job) => job.payload.n),
    { n: -1 },
  );
  expect(refused).toMatchObject({ status: 'failed', deadLetter: true });
  expect((refused as { error: Error }).error.message).toBe('count: the stored payload is invalid: payload.n is invalid: must be > 0');
});

it('runHandler reports a snooze (ctx.snooze or a thrown JobSnoozeError) and the progress values reported', async () => {
  const snoozed = await runHandler(async (_job, ctx) => {
    await ctx.progress(0.5);
    await ctx.progress({ done: 1 });
    return ctx.snooze(1_000);
  }, {});
  expect(snoozed).toEqual({ status: 'snoozed', delayMs: 1_000, steps: [], progress: [0.5, { done: 1 }] });
  const thrown = await runHandler(async () => {
    throw new JobSnoozeError(0);
  }, {});
  expect(thrown).toEqual({ status: 'snoozed', delayMs: 0, steps: [] }); // no progress reported: no key
  const bad = await runHandler(async (_job, ctx) => ctx.progress(Number.NaN), {});
  expect(bad).toMatchObject({ status: 'failed', deadLetter: false });
  expect((bad as { error: QError }).error.code).toBe('INVALID_ARGUMENT');
});
