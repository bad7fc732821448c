// Worker behaviour in-process, on real Postgres: exclusivity, retries, dead letter, cancel,
// notifications, lost leases, step timelines, results.
import { JobStore, type Job } from '@q/store';
import type { TestSchema } from '@q/testing';
import { expect, it } from 'vitest';
import { DeadLetterError, JobAbortedError, Worker, type JobQueue } from '../src/index.js';
import { memoryLogger, jobInStatus, useWorkerTests, waitFor, leaseTakenOver } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let queue: JobQueue;
const { startWorker, running } = useWorkerTests('jworker', { concurrency: 2, leaseDurationMs: 3_000 }, (t) => ({ schema, store, queue } = t));

const statusOf = (uuid: string, status: Job['status']) => jobInStatus(store, uuid, status);

/** A logger that keeps what it is given. */
it('20 jobs × 8 concurrent workers: each job is leased and run exactly once', async () => {
  const jobs = await queue.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ type: 'count', payload: { i } })));
  const runs: string[] = [];
  for (let w = 0; w < 8; w++) {
    startWorker({ concurrency: 2, workerId: `w${w}` }, (worker) =>
      worker.register('count', async (job) => {
        runs.push(job.uuid);
        await new Promise((r) => setTimeout(r, 20));
        return job.payload;
      }),
    );
  }
  await waitFor(async () => {
    const { rows } = await store.pool.query(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'succeeded'`);
    return rows[0].n === 20;
  });
  expect(runs.sort()).toEqual(jobs.map((j) => j.uuid).sort());
  const { rows } = await store.pool.query(`SELECT DISTINCT attempt FROM q_jobs_all`);
  expect(rows).toEqual([{ attempt: 1 }]);
});

it('lock-key race across workers: never two jobs of one key at once, no error logged', async () => {
  await queue.enqueueMany(Array.from({ length: 12 }, () => ({ type: 'locked', lockKey: 'server:1' })));
  let active = 0;
  let maxActive = 0;
  const logs = memoryLogger();
  for (let w = 0; w < 3; w++) {
    startWorker({ concurrency: 4, workerId: `lk${w}`, logger: logs }, (worker) =>
      worker.register('locked', async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        await new Promise((r) => setTimeout(r, 10));
        active--;
      }),
    );
  }
  await waitFor(async () => (await store.list({ status: 'succeeded', limit: 100 })).jobs.length === 12, 40_000);
  expect(maxActive).toBe(1);
  expect(logs.lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
});

it('a failing job goes to retry_wait with backoff, then to the dead letter after maxAttempts', async () => {
  const job = await queue.enqueue({ type: 'boom', maxAttempts: 2 });
  const attempts: number[] = [];
  startWorker({ retryBaseMs: 400 }, (w) =>
    w.register('boom', async (j) => {
      attempts.push(j.attempt);
      throw new Error('boom\nat stack');
    }),
  );
  const waiting = await waitFor(statusOf(job.uuid, 'retry_wait'));
  const delay = waiting.runAt.getTime() - waiting.updatedAt.getTime();
  expect(delay).toBeGreaterThanOrEqual(0.8 * 400 - 5);
  expect(delay).toBeLessThan(1.2 * 400 + 5);
  expect(waiting).toMatchObject({ attempt: 1, lastError: 'boom\nat stack', leasedBy: null });
  const dead = await waitFor(statusOf(job.uuid, 'dead_letter'));
  expect(dead).toMatchObject({ attempt: 2, lastError: 'boom\nat stack' });
  expect(dead.deadLetteredAt).not.toBeNull();
  expect(attempts).toEqual([1, 2]);
});

it('a DeadLetterError (or a subclass) dead-letters the job at once, whatever the attempt count', async () => {
  class GiveUp extends DeadLetterError {}
  const a = await queue.enqueue({ type: 'give-up', maxAttempts: 5 });
  const b = await queue.enqueue({ type: 'give-up-sub', maxAttempts: 5 });
  const attempts: number[] = [];
  startWorker({ retryBaseMs: 60_000 }, (w) => {
    w.register('give-up', async (j) => {
      attempts.push(j.attempt);
      throw new DeadLetterError('payload is malformed');
    });
    w.register('give-up-sub', async () => {
      throw new GiveUp('receiver answered 410');
    });
  });
  const dead = await waitFor(statusOf(a.uuid, 'dead_letter'));
  expect(dead).toMatchObject({ attempt: 1, maxAttempts: 5, lastError: 'payload is malformed', leasedBy: null });
  expect(dead.deadLetteredAt).not.toBeNull();
  expect(attempts).toEqual([1]);
  expect(await waitFor(statusOf(b.uuid, 'dead_letter'))).toMatchObject({ attempt: 1, lastError: 'receiver answered 410' });
  expect(new DeadLetterError('x')).toBeInstanceOf(Error);
});

it('a job type without a handler is a failed attempt', async () => {
  const job = await queue.enqueue({ type: 'nobody', maxAttempts: 1 });
  startWorker({}, () => undefined);
  const dead = await waitFor(statusOf(job.uuid, 'dead_letter'));
  expect(dead.lastError).toBe('no handler registered for job type "nobody"');
});

it('results are stored as JSON; undefined and non-serialisable results become null', async () => {
  const [a, b, c] = await queue.enqueueMany([
    { type: 'result', payload: { r: 'str' } },
    { type: 'result', payload: { r: 'undefined' } },
    { type: 'result', payload: { r: 'bigint' } },
  ]);
  startWorker({ concurrency: 3 }, (w) =>
    w.register('result', async (job) => {
      const r = (job.payload as { r: string }).r;
      return r === 'str' ? 'ok' : r === 'bigint' ? { n: 1n } : undefined;
    }),
  );
  expect((await waitFor(statusOf(a!.uuid, 'succeeded'))).result).toBe('ok');
  expect((await waitFor(statusOf(b!.uuid, 'succeeded'))).result).toBeNull();
  expect((await waitFor(statusOf(c!.uuid, 'succeeded'))).result).toBeNull();
});

it('cancel of a running job aborts its signal and the job ends cancelled', async () => {
  const job = await queue.enqueue({ type: 'wait-abort' });
  let reason: unknown;
  startWorker({ leaseDurationMs: 60_000 }, (w) =>
    w.register(
      'wait-abort',
      (_job, { signal }) =>
        new Promise((_resolve, reject) =>
          signal.addEventListener('abort', () => {
            reason = signal.reason;
            reject(new Error('stopped'));
          }),
        ),
    ),
  );
  await waitFor(statusOf(job.uuid, 'running'));
  expect(await queue.cancel(job.uuid)).toBe(true);
  const done = await waitFor(statusOf(job.uuid, 'cancelled'));
  expect(done.finishedAt).not.toBeNull();
  expect(reason).toBeInstanceOf(JobAbortedError);
  expect((reason as JobAbortedError).reason).toBe('cancelled');
  expect(await queue.cancel(job.uuid)).toBe(false);
});

it('an idle worker with a 30 s poll interval starts a new job within 1 s (notification)', async () => {
  let startedAt = 0;
  // Its own store, so its listener connection can be recognised by application_name.
  const own = await JobStore.open(schema.dsn, { maxConns: 2, applicationName: 'q-jobs-wake-test' });
  const w = new Worker(own, { queues: ['default'], concurrency: 1, pollIntervalMs: 30_000, maintenanceIntervalMs: 30_000 });
  w.register('wake', async () => {
    startedAt = Date.now();
  });
  const ac = new AbortController();
  running.push({
    worker: w,
    ac,
    run: w
      .run(ac.signal)
      .finally(() => w.wait(5_000))
      .finally(() => own.close()),
  });
  // Let it connect its listener (LISTEN is its last statement) and go idle.
  await waitFor(async () => {
    const { rows } = await store.pool.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE application_name = 'q-jobs-wake-test' AND query LIKE 'LISTEN %' AND state = 'idle'`,
    );
    return rows[0].n >= 1;
  });
  await new Promise((r) => setTimeout(r, 300));
  const before = Date.now();
  const job = await queue.enqueue({ type: 'wake' });
  await waitFor(statusOf(job.uuid, 'succeeded'), 10_000);
  expect(startedAt - before).toBeLessThan(1_000);
  expect(w.id).toBeTruthy();
});

it('stale execution: after its lease is reaped and re-leased, the old run is aborted and its writes change nothing', async () => {
  const job = await queue.enqueue({ type: 'stale' });
  let reason: unknown;
  let resume!: () => void;
  const afterAbort = new Promise<void>((r) => (resume = r));
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  // Heartbeats every 3 s; its own maintenance stays out of the way.
  startWorker({ concurrency: 1, leaseDurationMs: 9_000, maintenanceIntervalMs: 60_000, workerId: 'old' }, (w) =>
    w.register('stale', async (_job, { signal, steps }) => {
      await steps.start('before');
      await new Promise<void>((r) => signal.addEventListener('abort', () => r()));
      reason = signal.reason;
      // The stale run keeps going: every write it makes must be refused.
      await steps.succeed('late');
      await steps.start('after');
      resume();
      await finished; // hold the slot, so this worker does not claim the job again meanwhile
      return 'stale result';
    }),
  );
  await waitFor(async () => (await store.get(job.uuid))?.steps.length === 1);
  // The lease lapses (through the database clock), is reaped and re-leased by someone else.
  const fresh = await leaseTakenOver(store, job.uuid);
  expect(fresh!.uuid).toBe(job.uuid);
  const snapshot = await store.get(job.uuid);
  await afterAbort;
  expect((reason as JobAbortedError).reason).toBe('lease_lost');
  finish();
  await new Promise((r) => setTimeout(r, 300)); // let the stale outcome write happen (and be refused)
  const after = await store.get(job.uuid);
  expect(after).toEqual(snapshot);
  expect(after).toMatchObject({ status: 'leased', leasedBy: 'new', result: null, resumeCount: 1 });
  expect(after!.steps.map((s) => [s.name, s.status])).toEqual([['before', 'running']]);
});

it('step timeline: recorded as the handler goes; a new attempt replaces it; none recorded is []', async () => {
  const job = await queue.enqueue({ type: 'steps', maxAttempts: 3 });
  startWorker({ retryBaseMs: 2_000 }, (w) =>
    w.register('steps', async (j, { steps }) => {
      if (j.attempt === 1) {
        await steps.succeed('ignored: no step yet');
        await steps.start('fetch');
        await steps.succeed('fetched');
        await steps.start('build');
        await steps.fail('');
        await steps.skip('deploy', '');
        await steps.start('left running');
        throw new Error('first attempt fails');
      }
      return 'ok';
    }),
  );
  // The retry waits ≥ 1.6 s: long enough to read the first attempt's timeline.
  const first = await waitFor(statusOf(job.uuid, 'retry_wait'));
  {
    const [fetch, build, deploy, left] = first.steps;
    expect(first.steps).toHaveLength(4);
    expect(fetch).toMatchObject({ name: 'fetch', status: 'succeeded', message: 'fetched' });
    expect(fetch!.started_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/);
    expect(fetch!.finished_at).toMatch(/Z$/);
    expect(build).toMatchObject({ name: 'build', status: 'failed' });
    expect(build).not.toHaveProperty('message');
    expect(deploy).toEqual({ name: 'deploy', status: 'skipped', message: '', started_at: deploy!.started_at, finished_at: deploy!.started_at });
    expect(left).toMatchObject({ name: 'left running', status: 'running' });
    expect(left).not.toHaveProperty('finished_at');
  }
  const done = await waitFor(statusOf(job.uuid, 'succeeded'));
  expect(done.steps).toEqual([]);
});

it('wait() after abort drains: outcome recorded, then run and wait resolve; run twice is INVALID_STATE', async () => {
  const job = await queue.enqueue({ type: 'short' });
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const worker = new Worker(store, { queues: ['default'], concurrency: 1, pollIntervalMs: 100 });
  worker.register('short', async (_j, { steps, signal }) => {
    await steps.start('work');
    await gate;
    await steps.succeed('done');
    return { aborted: signal.aborted };
  });
  const ac = new AbortController();
  const run = worker.run(ac.signal);
  await waitFor(statusOf(job.uuid, 'running'));
  ac.abort();
  await run;
  setTimeout(release, 200);
  await worker.wait(20_000);
  const j = (await store.get(job.uuid))!;
  expect(j).toMatchObject({ status: 'succeeded', result: { aborted: false } });
  expect(j.steps.map((s) => [s.name, s.status, s.message])).toEqual([['work', 'succeeded', 'done']]);
  await expect(worker.run(new AbortController().signal)).rejects.toMatchObject({ code: 'INVALID_STATE' });
});
