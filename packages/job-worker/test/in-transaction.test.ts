// JobQueue.enqueue / enqueueMany with { client }: a worker runs what the caller's transaction
// committed, once, and is not woken by what it rolled back. Real Postgres, real Worker.
import { JobStore, type Job } from '@q/store';
import { inTransaction, useFromPool, type TestSchema } from '@q/testing';
import pg from 'pg';
import { expect, it } from 'vitest';
import { JobQueue, Worker } from '../src/index.js';
import { waitFor } from './helpers.js';

let schema: TestSchema;
let app: pg.Pool;
let store: JobStore;
let queue: JobQueue;

useFromPool(JobStore, { prefix: 'jwtx', max: 6, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] }, (t) => {
  ({ schema, app, store } = t);
  queue = new JobQueue(store, { knownQueues: ['default', 'tx'] });
});

/** Runs `fn` in a transaction on one of the app's connections; COMMIT unless `end` is ROLLBACK. */
const inTx = <T>(fn: (c: pg.PoolClient) => Promise<T>, end: 'COMMIT' | 'ROLLBACK' = 'COMMIT'): Promise<T> => inTransaction(app, fn, end);

/** An idle worker (30 s poll) whose claim calls are counted: a claim between polls is a wake-up. */
async function idleWorker(handled: Map<string, number>) {
  const own = await JobStore.open(schema.dsn, { maxConns: 2, applicationName: 'q-jobs-tx-wake' });
  let claims = 0;
  const claim = own.claim.bind(own);
  own.claim = (opts) => {
    claims++;
    return claim(opts);
  };
  const w = new Worker(own, { queues: ['tx'], concurrency: 2, pollIntervalMs: 30_000, maintenanceIntervalMs: 30_000 });
  w.register('count', async (job: Job) => {
    handled.set(job.uuid, (handled.get(job.uuid) ?? 0) + 1);
  });
  const ac = new AbortController();
  const run = w.run(ac.signal);
  // Listening and idle: its listener's LISTEN is its last statement, and the first claims are done.
  await waitFor(async () => {
    const { rows } = await app.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE application_name = 'q-jobs-tx-wake' AND query LIKE 'LISTEN %' AND state = 'idle'`,
    );
    return rows[0].n >= 1;
  });
  await new Promise((r) => setTimeout(r, 500));
  return {
    claims: () => claims,
    async stop() {
      ac.abort();
      await run;
      await w.wait(5_000);
      await own.close();
    },
  };
}

it('committed in the caller’s transaction → the job runs once; rolled back → no wake-up, no job', async () => {
  const handled = new Map<string, number>();
  const w = await idleWorker(handled);
  try {
    const before = w.claims();
    await inTx((c) => queue.enqueue({ queue: 'tx', type: 'count' }, { client: c }), 'ROLLBACK');
    await inTx(
      (c) =>
        queue.enqueueMany(
          [
            { queue: 'tx', type: 'count' },
            { queue: 'tx', type: 'count' },
          ],
          { client: c },
        ),
      'ROLLBACK',
    );
    await new Promise((r) => setTimeout(r, 1_000));
    expect(w.claims()).toBe(before); // no notification reached it: it did not even look
    expect((await app.query('SELECT count(*)::int AS n FROM q_jobs_all')).rows[0].n).toBe(0);

    const t0 = Date.now();
    const job = await inTx((c) => queue.enqueue({ queue: 'tx', type: 'count', idempotencyKey: 'once' }, { client: c }));
    await waitFor(async () => (await store.get(job.uuid))?.status === 'succeeded', 10_000);
    expect(Date.now() - t0).toBeLessThan(5_000); // woken by the commit's notification, not the 30 s poll
    expect(w.claims()).toBeGreaterThan(before);
    // The same key enqueued again in another transaction returns it and runs nothing new.
    const again = await inTx((c) => queue.enqueue({ queue: 'tx', type: 'count', idempotencyKey: 'once' }, { client: c }));
    expect(again.id).toBe(job.id);
    await new Promise((r) => setTimeout(r, 300));
    expect([...handled.values()]).toEqual([1]);
  } finally {
    await w.stop();
  }
});

it('enqueueMany with { client }: all or none, with JobQueue’s checks before anything is sent', async () => {
  const jobs = await inTx((c) => queue.enqueueMany([{ type: 'a' }, { queue: 'tx', type: 'b', payload: { n: 1 } }], { client: c }));
  expect(jobs.map((j) => [j.queue, j.type])).toEqual([
    ['default', 'a'],
    ['tx', 'b'],
  ]);
  await inTx(async (c) => {
    await expect(queue.enqueue({ queue: 'nowhere', type: 'x' }, { client: c })).rejects.toMatchObject({ code: 'UNKNOWN_QUEUE' });
    await expect(queue.enqueueMany([{ type: 'ok' }, { type: 5 as unknown as string }], { client: c })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    // Still usable: the failures sent nothing.
    await queue.enqueue({ type: 'after' }, { client: c });
  });
  expect((await app.query('SELECT job_type FROM q_jobs_all ORDER BY id')).rows.map((r) => r.job_type)).toEqual(['a', 'b', 'after']);
});

it('a job enqueued with q_enqueue_job in SQL runs once', async () => {
  const handled = new Map<string, number>();
  const w = await idleWorker(handled);
  try {
    const { rows } = await app.query(`SELECT uuid FROM q_enqueue_job('tx', 'count', '{"from": "sql"}', '{}')`);
    await waitFor(async () => (await store.get(rows[0].uuid))?.status === 'succeeded', 10_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(handled.get(rows[0].uuid)).toBe(1);
  } finally {
    await w.stop();
  }
});
