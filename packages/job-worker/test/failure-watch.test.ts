// Loud failures (issue 18 item 2): a worker that hits a persistent database error logs it at
// error level at once, reports it through onError, and after a bounded number of identical
// failures stops, run() rejecting with that error; a transient error keeps being retried.
import { QError } from '@q/schema';
import { JobStore } from '@q/store';
import { createTestSchema, testRoles, type TestRoles, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { waitFor, workerOnOwnStore } from './helpers.js';

let schema: TestSchema;
let owner: JobStore;
let admin: pg.Pool;
let roles: TestRoles;
const extraSchemas: string[] = [];

beforeAll(async () => {
  schema = await createTestSchema('jwfail');
  owner = await JobStore.open(schema.dsn, { maxConns: 4 });
  admin = new pg.Pool({ connectionString: schema.serverDsn, max: 2 });
  roles = testRoles(schema);
});
afterAll(async () => {
  await owner?.close();
  await roles?.drop();
  for (const s of extraSchemas) await admin.query(`DROP SCHEMA "${s}" CASCADE`);
  await admin?.end();
  await schema?.drop();
});

/** A worker on its own store of `dsn` (see workerOnOwnStore), `opts` its maintenance interval and how many identical failures stop it. */
function watchedWorker(dsn: string, opts: { migrate?: boolean; maintenanceIntervalMs: number; maxPersistentFailures: number }) {
  const { migrate, ...wopts } = opts;
  return workerOnOwnStore(dsn, migrate === undefined ? {} : { migrate }, wopts);
}

/** Runs a worker on `dsn` until run() settles; returns how it settled, what it logged and reported. */
async function runUntilStopped(dsn: string, opts: { migrate?: boolean } = {}) {
  const { store, logger, failures, worker } = await watchedWorker(dsn, { ...opts, maintenanceIntervalMs: 100, maxPersistentFailures: 2 });
  const ac = new AbortController();
  const guard = setTimeout(() => ac.abort(), 30_000); // a worker that never stops fails the test below
  const startedAt = Date.now();
  const settled = await worker.run(ac.signal).then(
    () => ({ ok: true as const }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  clearTimeout(guard);
  const took = Date.now() - startedAt;
  await worker.wait(1_000);
  await store.close();
  return { settled, logger, failures, took };
}

function expectStoppedLoudly(r: Awaited<ReturnType<typeof runUntilStopped>>, sqlState: string, reason: RegExp): void {
  expect(r.settled.ok).toBe(false);
  const err = (r.settled as { err: unknown }).err;
  expect(err).toBeInstanceOf(QError);
  expect((err as QError).message).toMatch(/worker stopped after 2 identical (claim|maintenance) failures/);
  expect((err as QError).message).toMatch(reason);
  expect(r.took).toBeLessThan(25_000);
  const errors = r.logger.lines.filter((l) => l.level === 'error');
  expect(errors.length).toBeGreaterThanOrEqual(1);
  expect(errors[0]!.fields).toMatchObject({ kind: 'persistent', sqlstate: sqlState });
  expect(r.failures.some((f) => f.kind === 'persistent' && f.sqlState === sqlState && f.count === 1 && !f.fatal)).toBe(true);
  expect(r.failures.filter((f) => f.fatal)).toHaveLength(1);
}

it('a read-only role: the worker logs the error at once and stops with it (no silent retry forever)', async () => {
  const dsn = await roles.readOnlyDsn('ro');
  await owner.enqueue([{ queue: 'default', type: 't' }]);
  const r = await runUntilStopped(dsn);
  expectStoppedLoudly(r, '25006', /read-only transaction/);
});

it('a role without grants on the job table (permission denied) stops loudly', async () => {
  const dsn = await roles.noGrantsDsn('nogrant');
  const r = await runUntilStopped(dsn, { migrate: false });
  expectStoppedLoudly(r, '42501', /permission denied/);
});

it('an unmigrated schema (undefined table) stops loudly', async () => {
  const empty = `${schema.name}_empty`;
  await admin.query(`CREATE SCHEMA "${empty}"`);
  extraSchemas.push(empty);
  const u = new URL(schema.dsn);
  u.searchParams.set('options', `-c search_path=${empty}`);
  const r = await runUntilStopped(u.toString(), { migrate: false });
  expectStoppedLoudly(r, '42P01', /undefined table/);
});

it('a transient failure (statement timeout while the table is locked) is retried, not fatal, and the job runs after', async () => {
  const dsn = await roles.dsn('slow', (r) => [...roles.readWriteGrants(r), `ALTER ROLE "${r}" SET statement_timeout = '100ms'`]);
  await owner.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys');
  const [job] = await owner.enqueue([{ queue: 'default', type: 'after' }]);
  const lock = await owner.pool.connect();
  await lock.query('BEGIN');
  await lock.query('LOCK TABLE q_jobs IN ACCESS EXCLUSIVE MODE');
  const { store, logger, failures, worker } = await watchedWorker(dsn, {
    migrate: false,
    maintenanceIntervalMs: 60_000,
    maxPersistentFailures: 1,
  });
  worker.register('after', async () => 'ran');
  const ac = new AbortController();
  const run = worker.run(ac.signal);
  try {
    await waitFor(() => failures.filter((f) => f.operation === 'claim').length >= 2 || undefined, 20_000);
    expect(failures.every((f) => f.kind === 'transient' && !f.fatal)).toBe(true);
    expect(failures[0]!.sqlState).toBe('57014');
    expect(logger.lines.filter((l) => l.level === 'error')).toEqual([]);
  } finally {
    await lock.query('ROLLBACK');
    lock.release();
  }
  await waitFor(async () => ((await owner.get(job!.uuid))?.status === 'succeeded' ? true : undefined), 30_000);
  ac.abort();
  await run;
  await worker.wait(1_000);
  await store.close();
});
