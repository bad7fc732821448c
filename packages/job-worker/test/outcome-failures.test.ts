// The claim/complete loop's process-side bookkeeping under real faults (issue 34): an outcome
// write that fails persistently (a revoked grant) stops the worker loudly; one that can never
// succeed (statement_timeout shorter than the write) ends the attempt once; a shutdown with a
// claim in flight strands nothing.
import { randomBytes } from 'node:crypto';
import { QError } from '@q/schema';
import { JobStore } from '@q/store';
import { createTestSchema, testRoles, type TestRoles, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import type { WorkerOptions } from '../src/index.js';
import { waitFor, workerOnOwnStore } from './helpers.js';

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

/** A worker on its own store of `dsn` (3 connections, not migrating; see workerOnOwnStore). */
function ownWorker(dsn: string, opts: Partial<WorkerOptions> & { applicationName?: string }) {
  const { applicationName, ...wopts } = opts;
  return workerOnOwnStore(dsn, { maxConns: 3, migrate: false, ...(applicationName ? { applicationName } : {}) }, wopts);
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

it('a persistent outcome-write failure (INSERT on q_jobs_archive revoked) is loud, stops the worker, and run() and wait() return', async () => {
  const dsn = await roles.dsn('noarchive', (r) => [...roles.readWriteGrants(r), `REVOKE INSERT ON "${schema.name}".q_jobs_archive FROM "${r}"`]);
  await owner.enqueue(Array.from({ length: 3 }, () => ({ queue: 'default', type: 'ok' })));
  const { store, logger, failures, worker } = await ownWorker(dsn, { maxPersistentFailures: 2 });
  let runs = 0;
  worker.register('ok', async () => {
    runs++;
    return 'done';
  });
  const ac = new AbortController();
  const guard = setTimeout(() => ac.abort(), 30_000); // a worker that never stops fails below
  const startedAt = Date.now();
  const settled = await worker.run(ac.signal).then(
    () => ({ ok: true as const, err: undefined }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  clearTimeout(guard);
  const took = Date.now() - startedAt;
  const waited = await Promise.race([worker.wait(5_000).then(() => true), new Promise((r) => setTimeout(() => r(false), 15_000))]);
  await store.close();
  expect(waited).toBe(true);
  expect(settled.ok).toBe(false);
  expect(settled.err).toBeInstanceOf(QError);
  expect((settled.err as QError).message).toMatch(/worker stopped after 2 identical complete failures.*permission denied/);
  expect(took).toBeLessThan(25_000);
  const errors = logger.lines.filter((l) => l.level === 'error');
  expect(errors[0]?.fields).toMatchObject({ operation: 'complete', kind: 'persistent', sqlstate: '42501' });
  expect(failures.filter((f) => f.operation === 'complete' && f.sqlState === '42501').length).toBeGreaterThanOrEqual(2);
  expect(failures.filter((f) => f.fatal)).toHaveLength(1);
  // Each handler ran once at most: nothing is re-run every lease period.
  expect(runs).toBeLessThanOrEqual(3);
});

it('an outcome too large to write within statement_timeout ends the attempt once as a failure saying why, not a re-run every lease', async () => {
  const dsn = await roles.dsn('slowwrite', (r) => [...roles.readWriteGrants(r), `ALTER ROLE "${r}" SET statement_timeout = '500ms'`]);
  // How long a 12 MiB write takes depends on the machine, so the archive row of a large result
  // is made to take a second for certain: the write always outlasts the 500 ms limit.
  const q = `"${schema.name}"`;
  await owner.pool.query(`CREATE FUNCTION ${q}.slow_large_result() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF octet_length(NEW.result::text) > 1000000 THEN PERFORM pg_sleep(1); END IF; RETURN NEW; END $$`);
  await owner.pool.query(
    `CREATE TRIGGER slow_large_result BEFORE INSERT ON ${q}.q_jobs_archive FOR EACH ROW EXECUTE FUNCTION ${q}.slow_large_result()`,
  );
  const [job] = await owner.enqueue([{ queue: 'default', type: 'big', maxAttempts: 1 }]);
  const { store, logger, worker } = await ownWorker(dsn, { leaseDurationMs: 5_000, maintenanceIntervalMs: 200, prefetch: 0 });
  // 12 MiB of incompressible text (inside the 64 MiB limit).
  const big = randomBytes(9 * 2 ** 20).toString('base64');
  let runs = 0;
  worker.register('big', async () => {
    runs++;
    return { big };
  });
  const ac = new AbortController();
  const run = worker.run(ac.signal);
  try {
    // Three leases: long enough for the old behaviour (reaped, run again) to show.
    await waitFor(async () => ((await owner.get(job!.uuid))?.status === 'dead_letter' ? true : undefined), 15_000).catch(() => undefined);
    const after = await owner.get(job!.uuid);
    expect(runs).toBe(1);
    expect(after?.status).toBe('dead_letter');
    expect(after?.lastError).toMatch(/cannot be stored: its write exceeded statement_timeout 2 times \(12\.0 MiB\)/);
    expect(logger.lines.some((l) => l.level === 'error' && /statement_timeout/.test(l.msg ?? ''))).toBe(true);
  } finally {
    ac.abort();
    await run;
    await worker.wait(5_000);
    await store.close();
    await owner.pool.query(`DROP TRIGGER slow_large_result ON ${q}.q_jobs_archive; DROP FUNCTION ${q}.slow_large_result()`);
  }
});
