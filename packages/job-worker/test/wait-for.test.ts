// Awaiting a job's end (issue 39 item 4): queue.waitFor resolves for each way a job finishes,
// woken by the finished channel's notification (well before the safety poll), shares one LISTEN
// connection among many waits, finishes by polling when that connection is cut or cannot exist,
// and rejects with a typed error on timeout, abort, an unknown job, bad input and close.
import { QError } from '@q/schema';
import { JobStore } from '@q/store';
import type { TestSchema } from '@q/testing';
import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import { JobQueue, type JobQueue as Queue } from '../src/index.js';
import { useWorkerTests, waitFor } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let queue: Queue;
const { startWorker } = useWorkerTests('jwwait', { concurrency: 4 }, (t) => ({ schema, store, queue } = t));

const extra: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const f of extra.splice(0)) await f();
});

/** The backends LISTENing on `channel` (pg_stat_activity shows the session's last statement). */
async function listeners(channel: string): Promise<number[]> {
  const { rows } = await schema
    .pool()
    .query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()`, [`LISTEN "${channel}"`]);
  return rows.map((r) => r.pid);
}

function startEchoWorker(): void {
  startWorker({ retryBaseMs: 1 }, (w) => {
    w.register('echo', async (j) => ({ echoed: j.payload }));
    w.register('boom', async () => {
      throw new Error('boom');
    });
    w.register('slow', async (_j, ctx) => {
      await new Promise((resolve) => {
        const t = setTimeout(resolve, 30_000);
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(t);
          resolve(undefined);
        });
      });
    });
  });
}

it('resolves with the finished job for each end: succeeded (with its result), dead letter, cancelled', async () => {
  startEchoWorker();
  const ok = await queue.enqueue({ type: 'echo', payload: { n: 1 } });
  const bad = await queue.enqueue({ type: 'boom', maxAttempts: 1 });
  const later = await queue.enqueue({ type: 'echo', runAt: new Date(Date.now() + 3_600_000) });
  const waits = [queue.waitFor(ok.uuid), queue.waitFor(bad.uuid), queue.waitFor(later.uuid)];
  expect(await queue.cancel(later.uuid)).toBe(true);
  const [a, b, c] = await Promise.all(waits);
  expect(a).toMatchObject({ uuid: ok.uuid, status: 'succeeded', result: { echoed: { n: 1 } } });
  expect(b).toMatchObject({ uuid: bad.uuid, status: 'dead_letter' });
  expect(b?.lastError).toContain('boom');
  expect(c).toMatchObject({ uuid: later.uuid, status: 'cancelled' });
  // A job that has finished already resolves at once.
  const t0 = Date.now();
  expect(await queue.waitFor(ok.uuid.toUpperCase())).toMatchObject({ status: 'succeeded' });
  expect(Date.now() - t0).toBeLessThan(500);
});

it('is woken by the notification of the statement that finished the job, not by the 10 s safety poll', async () => {
  const job = await queue.enqueue({ type: 'echo', payload: 1 });
  const wait = queue.waitFor(job.uuid);
  // The one listener is up (LISTEN issued), and the job is still queued: only a wake-up ends the wait.
  await waitFor(async () => (await listeners(store.finishedChannel)).length === 1);
  await new Promise((r) => setTimeout(r, 1_200));
  const started = Date.now();
  startEchoWorker();
  expect(await wait).toMatchObject({ status: 'succeeded' });
  // Without the notification the wait would end at the next poll, 10 s after the listener came up.
  expect(Date.now() - started).toBeLessThan(3_000);
});

it('many waits share one LISTEN connection', async () => {
  const jobs = await queue.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ type: 'echo', payload: i })));
  const waits = jobs.map((j) => queue.waitFor(j.uuid));
  await waitFor(async () => (await listeners(store.finishedChannel)).length === 1);
  await new Promise((r) => setTimeout(r, 300));
  expect(await listeners(store.finishedChannel)).toHaveLength(1);
  startEchoWorker();
  const done = await Promise.all(waits);
  expect(done.map((j) => j.status)).toEqual(jobs.map(() => 'succeeded'));
  expect(done.map((j) => j.result)).toEqual(jobs.map((_, i) => ({ echoed: i })));
});

it('finishes when the listening connection is cut mid-wait', async () => {
  const job = await queue.enqueue({ type: 'echo', payload: 'cut' });
  const wait = queue.waitFor(job.uuid, { timeoutMs: 20_000 });
  await waitFor(async () => (await listeners(store.finishedChannel)).length === 1);
  const [pid] = await listeners(store.finishedChannel);
  await schema.pool().query('SELECT pg_terminate_backend($1)', [pid]);
  startEchoWorker();
  expect(await wait).toMatchObject({ status: 'succeeded', result: { echoed: 'cut' } });
});

it('behind a transaction pooler (no LISTEN possible) it finishes by polling', async () => {
  const polled = await JobStore.open(schema.dsn, { maxConns: 2, pooler: 'transaction', migrate: false, applicationName: 'q-wait-poll' });
  extra.push(() => polled.close());
  const pq = new JobQueue(polled, { knownQueues: ['default'] });
  const job = await pq.enqueue({ type: 'echo', payload: 'polled' });
  const wait = pq.waitFor(job.uuid, { timeoutMs: 20_000 });
  startEchoWorker();
  expect(await wait).toMatchObject({ status: 'succeeded', result: { echoed: 'polled' } });
  const { rows } = await schema.pool().query(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'q-wait-poll' AND query LIKE 'LISTEN%'`);
  expect(rows).toHaveLength(0);
});

it('times out with a TIMEOUT error, and an abort rejects with the signal reason; the job is untouched', async () => {
  const job = await queue.enqueue({ type: 'echo', payload: 't' });
  const t0 = Date.now();
  const err = await queue.waitFor(job.uuid, { timeoutMs: 300 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(QError);
  expect(err).toMatchObject({ code: 'TIMEOUT' });
  expect((err as Error).message).toMatch(/did not finish within 300 ms/);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
  expect(Date.now() - t0).toBeLessThan(2_000);

  const ac = new AbortController();
  const aborted = queue.waitFor(job.uuid, { signal: ac.signal });
  const reason = new Error('caller gave up');
  ac.abort(reason);
  await expect(aborted).rejects.toBe(reason);
  await expect(queue.waitFor(job.uuid, { signal: AbortSignal.abort('before') })).rejects.toBe('before');
  expect((await queue.get(job.uuid))?.status).toBe('queued');
});

it('rejects bad input with INVALID_ARGUMENT and an unknown job with NOT_FOUND', async () => {
  for (const [uuid, opts] of [
    ['not-a-uuid', {}],
    ['00000000-0000-8000-8000-000000000001', { timeoutMs: -1 }],
    ['00000000-0000-8000-8000-000000000001', { timeoutMs: 1.5 }],
    ['00000000-0000-8000-8000-000000000001', { signal: {} as AbortSignal }],
  ] as const) {
    // A rejection, never a synchronous throw: `.then` would not be reached if waitFor threw.
    const thrown: unknown = await queue.waitFor(uuid, opts).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(thrown).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((thrown as Error).message).toMatch(/^waitFor: /);
  }
  await expect(queue.waitFor('00000000-0000-8000-8000-000000000001', { timeoutMs: 5_000 })).rejects.toMatchObject({ code: 'NOT_FOUND' });
});

it('closing the store rejects the waits with CLOSED and closes the listener', async () => {
  const own = await JobStore.open(schema.dsn, { maxConns: 2, migrate: false, applicationName: 'q-wait-close' });
  const job = await new JobQueue(own, { knownQueues: ['default'] }).enqueue({ type: 'echo' });
  const wait = own.waitFor(job.uuid);
  await waitFor(async () => (await listeners(own.finishedChannel)).length >= 1);
  const rejected = expect(wait).rejects.toMatchObject({ code: 'CLOSED' });
  await own.close();
  await rejected;
  await expect(own.waitFor(job.uuid)).rejects.toMatchObject({ code: 'CLOSED' });
  const c = new pg.Client({ connectionString: schema.serverDsn });
  await c.connect();
  try {
    await waitFor(async () => (await c.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'q-wait-close'`)).rows.length === 0);
  } finally {
    await c.end();
  }
});
