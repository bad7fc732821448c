// The claim/complete loop's process-side bookkeeping under real faults (issue 34): an outcome
// write that fails persistently (a revoked grant) stops the worker loudly; one that can never
// succeed (statement_timeout shorter than the write) ends the attempt once; a shutdown with a
// claim in flight strands nothing.
import { QError } from '@q/schema';
import { JobStore } from '@q/store';
import { createTestSchema, memoryLogger, testRoles, type TestRoles, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { Worker, type WorkerFailure, type WorkerOptions } from '../src/index.js';
import { waitFor } from './helpers.js';

let schema: TestSchema;
let owner: JobStore;
let roles: TestRoles;

beforeAll(async () => {
  schema = await createTestSchema('jwoutcome');
  owner = await JobStore.open(schema.dsn, { maxConns: 4 });
  roles = testRoles(schema);
});
afterAll(async () => {
  await owner?.close();
  await roles?.drop();
  await schema?.drop();
});
beforeEach(async () => {
  await owner.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys');
});

const count = async (where: string): Promise<number> =>
  (await owner.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE ${where}`)).rows[0]!.n;

/** A worker on its own store of `dsn`, logging to memory and collecting what it reports through `onError`. */
async function ownWorker(dsn: string, opts: Partial<WorkerOptions> & { applicationName?: string }) {
  const { applicationName, ...wopts } = opts;
  const store = await JobStore.open(dsn, { maxConns: 3, migrate: false, ...(applicationName ? { applicationName } : {}) });
  const logger = memoryLogger();
  const failures: WorkerFailure[] = [];
  const worker = new Worker(store, {
    queues: ['default'],
    concurrency: 1,
    logger,
    pollIntervalMs: 100,
    maintenanceIntervalMs: 60_000,
    onError: (f) => failures.push(f),
    ...wopts,
  });
  return { store, logger, failures, worker };
}

it('wait(t) then store.close() with a claim in flight: the jobs it returns go back to the queue, none is stranded', async () => {
  await owner.enqueue(Array.from({ length: 3 }, () => ({ queue: 'default', type: 'x' })));
  // The claim statement waits behind a table lock until after wait(100) has timed out.
  const lock = await owner.pool.connect();
  await lock.query('BEGIN');
  await lock.query('LOCK TABLE q_jobs IN ACCESS EXCLUSIVE MODE');
  const { store, worker } = await ownWorker(schema.dsn, { concurrency: 3, prefetch: 0, applicationName: 'q-jobs-close-claim' });
  worker.register('x', async () => undefined);
  const run = worker.run(new AbortController().signal);
  let unlocked = false;
  try {
    await waitFor(async () => {
      const { rows } = await owner.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE application_name = 'q-jobs-close-claim' AND wait_event_type = 'Lock' AND query LIKE '%q_jobs%'`,
      );
      return rows[0]!.n >= 1;
    });
    // What JobQueue.close does: wait, then close the store.
    const closed = worker.wait(100).then(() => store.close());
    await new Promise((r) => setTimeout(r, 500));
    await lock.query('COMMIT');
    unlocked = true;
    await closed;
    await run;
  } finally {
    if (!unlocked) await lock.query('ROLLBACK');
    lock.release();
  }
  expect(await count(`status = 'queued' AND lease_token IS NULL AND attempt = 0`)).toBe(3);
});
