// An idle scheduler sleeps until its next fire time while its worker listens, and a schedule
// created or changed wakes it through the job channel; without notifications (a transaction
// pooler) it reads every second. Counted by the reads of due schedules each worker's store sends.
import { JobStore } from '@q/store';
import { createTestSchema, sleep, waitFor as waitUntil, type TestSchema } from '@q/testing';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { JobQueue, KNOWN_QUEUES, Worker } from '../src/index.js';

let schema: TestSchema;
let admin: JobStore;
let queue: JobQueue;
const open: Array<{ close(): Promise<void> }> = [];
const aborts: AbortController[] = [];

beforeAll(async () => {
  schema = await createTestSchema('jwschedwake');
  admin = await JobStore.open(schema.dsn, { maxConns: 2 });
  queue = new JobQueue(admin, { knownQueues: [...KNOWN_QUEUES, 'sched'] });
});
afterEach(async () => {
  for (const a of aborts.splice(0)) a.abort();
  for (const s of open.splice(0).reverse()) await s.close();
  await admin.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys, q_schedules');
});
afterAll(async () => {
  await admin?.close();
  await schema?.drop();
});

/** A worker on its own store whose reads of due schedules are counted. */
async function countingWorker(opts: { pooler?: boolean } = {}): Promise<{ reads: () => number; worker: Worker }> {
  const store = await JobStore.open(schema.dsn, {
    maxConns: 4,
    migrate: false,
    ...(opts.pooler ? { pooler: 'transaction' as const } : {}),
  });
  open.push(store);
  let reads = 0;
  const due = store.dueSchedules.bind(store);
  store.dueSchedules = (...args: Parameters<JobStore['dueSchedules']>) => {
    reads++;
    return due(...args);
  };
  const worker = new Worker(store, { queues: ['unused'], concurrency: 1 });
  const abort = new AbortController();
  aborts.push(abort);
  void worker.run(abort.signal);
  open.push({ close: () => worker.wait(5_000) });
  return { reads: () => reads, worker };
}

async function jobsOf(name: string): Promise<number> {
  const { rows } = await admin.pool.query<{ n: string }>(`SELECT count(*) AS n FROM q_jobs_all WHERE payload->>'name' = $1`, [name]);
  return Number(rows[0]?.n ?? 0);
}

it('a listening worker does not read every second, and a new schedule wakes it at once', async () => {
  // A schedule far away: the worker's next fire time is an hour out.
  await queue.schedule({ name: 'hourly', cron: '0 * * * *', type: 't', queue: 'sched', payload: { name: 'hourly' } });
  const w = await countingWorker();
  await waitUntil(() => w.reads() >= 1, 5_000);
  await sleep(1_000); // the listener is up and the first read done
  const before = w.reads();
  await sleep(4_000);
  // Polling every second would have read 4 times here.
  expect(w.reads() - before).toBeLessThanOrEqual(1);

  // A schedule due every second, created elsewhere: fired by the sleeping worker within a second
  // or two (its next read was up to 30 s away).
  const t0 = Date.now();
  await queue.schedule({ name: 'every-second', cron: '* * * * * *', type: 't', queue: 'sched', payload: { name: 'every-second' } });
  await waitUntil(async () => (await jobsOf('every-second')) >= 1, 5_000);
  expect(Date.now() - t0).toBeLessThan(3_000);
}, 30_000);

it('behind a transaction pooler (no LISTEN) it reads every second and still sees a new schedule', async () => {
  await queue.schedule({ name: 'hourly', cron: '0 * * * *', type: 't', queue: 'sched', payload: { name: 'hourly' } });
  const w = await countingWorker({ pooler: true });
  await waitUntil(() => w.reads() >= 1, 5_000);
  const before = w.reads();
  await sleep(4_000);
  expect(w.reads() - before).toBeGreaterThanOrEqual(3);
  const t0 = Date.now();
  await queue.schedule({ name: 'every-second', cron: '* * * * * *', type: 't', queue: 'sched', payload: { name: 'every-second' } });
  await waitUntil(async () => (await jobsOf('every-second')) >= 1, 5_000);
  expect(Date.now() - t0).toBeLessThan(3_500);
}, 30_000);

it('a worker whose listener comes back reads at once (a notification sent while it was down is lost)', async () => {
  await queue.schedule({ name: 'hourly', cron: '0 * * * *', type: 't', queue: 'sched', payload: { name: 'hourly' } });
  const w = await countingWorker();
  await waitUntil(() => w.reads() >= 1, 5_000);
  await sleep(1_000);
  // Cut the worker's LISTEN connection; the schedule is created while it reconnects.
  await admin.pool.query(
    `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()`,
  );
  await queue.schedule({ name: 'every-second', cron: '* * * * * *', type: 't', queue: 'sched', payload: { name: 'every-second' } });
  const t0 = Date.now();
  // Reconnect backoff starts at 0.5 s; the 1 s polling while down also covers it.
  await waitUntil(async () => (await jobsOf('every-second')) >= 1, 10_000);
  expect(Date.now() - t0).toBeLessThan(5_000);
}, 30_000);
