// Batch handlers (issue 39 item 7): queue.workMany hands up to batchSize jobs to one call; each
// job's outcome is its own (success with its result, its own retry or dead letter); a throw fails
// them all; a lease lost mid-batch fences the outcome of every job whose lease was taken; bad
// options are INVALID_ARGUMENT before any worker starts.
import type { JobStore } from '@q/store';
import type { TestSchema } from '@q/testing';
import { afterEach, expect, it } from 'vitest';
import { DeadLetterError, JobQueue, batchHandler, silentLogger, type BatchItem } from '../src/index.js';
import { useWorkerTests, waitFor } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
const { startWorker } = useWorkerTests('jwmany', { concurrency: 8 }, (t) => ({ schema, store } = t));

const opened: JobQueue[] = [];
afterEach(async () => {
  for (const q of opened.splice(0)) await q.close();
});

async function open(): Promise<JobQueue> {
  const q = await JobQueue.open(schema.dsn, {
    maxConns: 3,
    migrate: false,
    logger: silentLogger,
    worker: { pollIntervalMs: 100, retryBaseMs: 1 },
  });
  opened.push(q);
  return q;
}

it('one call per batch of up to batchSize jobs; every job succeeds with the result given for it', async () => {
  const q = await open();
  const jobs = await q.enqueueMany(Array.from({ length: 25 }, (_, i) => ({ type: 'sum', payload: { n: i } })));
  const sizes: number[] = [];
  q.workMany(
    'sum',
    async (items) => {
      sizes.push(items.length);
      return items.map(({ job }) => ({ result: { twice: (job.payload as { n: number }).n * 2 } }));
    },
    { batchSize: 10, maxWaitMs: 200 },
  );
  const done = await Promise.all(jobs.map((j) => q.waitFor(j.uuid, { timeoutMs: 20_000 })));
  expect(done.map((j) => j.status)).toEqual(jobs.map(() => 'succeeded'));
  expect(done.map((j) => j.result)).toEqual(jobs.map((_, i) => ({ twice: i * 2 })));
  expect(sizes.reduce((a, b) => a + b, 0)).toBe(25);
  expect(Math.max(...sizes)).toBe(10);
  expect(sizes.length).toBeLessThanOrEqual(5);
});

it('a mixed batch records each outcome: success, its own retry, its own dead letter; nothing returned means success', async () => {
  const q = await open();
  const [ok, retry, dead] = await q.enqueueMany([
    { type: 'mixed', payload: 'ok' },
    { type: 'mixed', payload: 'retry', maxAttempts: 2 },
    { type: 'mixed', payload: 'dead', maxAttempts: 5 },
  ]);
  q.workMany(
    'mixed',
    async (items) =>
      items.map(({ job }) => {
        if (job.payload === 'ok') return { result: 'fine' };
        if (job.payload === 'retry' && job.attempt === 1) return { error: new Error('try again') };
        if (job.payload === 'dead') return { error: new DeadLetterError('never') };
        return {};
      }),
    { batchSize: 3, maxWaitMs: 500 },
  );
  q.workMany('none', async () => undefined, { batchSize: 3, queue: 'batch-none', maxWaitMs: 10 });
  const plainQueue = await q.enqueue({ type: 'none', queue: 'batch-none', payload: 'plain' });
  const [a, b, c] = await Promise.all([ok!, retry!, dead!].map((j) => q.waitFor(j.uuid, { timeoutMs: 20_000 })));
  expect(a).toMatchObject({ status: 'succeeded', result: 'fine', attempt: 1 });
  expect(b).toMatchObject({ status: 'succeeded', attempt: 2, lastError: 'try again' });
  expect(c).toMatchObject({ status: 'dead_letter', attempt: 1, lastError: 'never' });
  expect(await q.waitFor(plainQueue.uuid, { timeoutMs: 20_000 })).toMatchObject({ status: 'succeeded', result: null });
});

it('a throw fails every job of the batch; a wrong number of outcomes fails them all with a clear error', async () => {
  const q = await open();
  const jobs = await q.enqueueMany([1, 2, 3].map((n) => ({ type: 'throws', payload: n, maxAttempts: 1 })));
  q.workMany(
    'throws',
    async () => {
      throw new Error('bulk insert failed');
    },
    { batchSize: 3, maxWaitMs: 500 },
  );
  const done = await Promise.all(jobs.map((j) => q.waitFor(j.uuid, { timeoutMs: 20_000 })));
  expect(done.map((j) => [j.status, j.lastError])).toEqual(jobs.map(() => ['dead_letter', 'bulk insert failed']));

  const short = await q.enqueueMany([1, 2].map((n) => ({ type: 'short', queue: 'batch-short', payload: n, maxAttempts: 1 })));
  q.workMany('short', async (items) => items.slice(1).map(() => ({})), { batchSize: 2, maxWaitMs: 500, queue: 'batch-short' });
  const bad = await Promise.all(short.map((j) => q.waitFor(j.uuid, { timeoutMs: 20_000 })));
  for (const j of bad) {
    expect(j.status).toBe('dead_letter');
    expect(j.lastError).toMatch(/one outcome per job \(2\), or nothing; it returned 1 outcomes/);
  }
});

it('a lease lost mid-batch: every job whose lease was taken is fenced (nothing recorded) and reported lost', async () => {
  const batchSeen: BatchItem[][] = [];
  const lost: string[] = [];
  const jobs = await store.enqueue([1, 2, 3, 4].map((n) => ({ queue: 'default', type: 'steal', payload: n })));
  startWorker({ leaseDurationMs: 3_000, retryBaseMs: 1 }, (w) => {
    w.on('job:lease-lost', ({ job }) => void lost.push(job.uuid));
    w.register(
      'steal',
      batchHandler(
        async (items) => {
          batchSeen.push([...items]);
          // Another process takes every lease of the batch (as a claim after a lapse would).
          await schema
            .pool()
            .query(`UPDATE q_jobs SET lease_token = gen_random_uuid(), leased_by = 'thief' WHERE id = ANY($1::int8[])`, [
              items.map((i) => i.job.id),
            ]);
          await waitFor(() => items.every((i) => i.signal.aborted), { timeoutMs: 10_000 });
          return items.map(() => ({ result: 'late' }));
        },
        { batchSize: 4, maxWaitMs: 1_000 },
      ),
    );
  });
  await waitFor(() => lost.length === 4, { timeoutMs: 15_000 });
  expect(batchSeen).toHaveLength(1);
  expect(batchSeen[0]).toHaveLength(4);
  expect(new Set(lost)).toEqual(new Set(jobs.map((j) => j.uuid)));
  await new Promise((r) => setTimeout(r, 300));
  const { rows } = await schema
    .pool()
    .query<{ status: string; leased_by: string; result: unknown }>(
      `SELECT status, leased_by, result FROM q_jobs_all WHERE id = ANY($1::int8[])`,
      [jobs.map((j) => j.id)],
    );
  expect(rows).toHaveLength(4);
  for (const r of rows) expect(r).toMatchObject({ leased_by: 'thief', result: null });
  expect(rows.every((r) => r.status === 'leased' || r.status === 'running')).toBe(true);
});

it('bad options are INVALID_ARGUMENT before any worker starts', async () => {
  const q = await open();
  const fn = async () => undefined;
  for (const opts of [
    { batchSize: 0 },
    { batchSize: 1.5 },
    { batchSize: 10_001 },
    { maxWaitMs: -1 },
    { maxWaitMs: 60_001 },
    { batchSize: 10, concurrency: 5 },
  ]) {
    expect(() => q.workMany('x', fn, opts)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^workMany: /) }),
    );
  }
  expect(() => batchHandler('nope' as never)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  expect(q.health()).toEqual([]);
});
