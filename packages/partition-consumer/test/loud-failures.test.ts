// Loud failures (issue 18 item 2): a partition worker whose store calls fail persistently
// (read-only role, no grants) logs at error level at once, reports through onError, and stops
// with that error instead of retrying silently forever.
import { QError } from '@q/schema';
import { RequestStore } from '@q/store';
import { type TestSchema, memoryLogger, testRoles, type TestRoles } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runPartitionWorker, type PartitionWorkerFailure } from '../src/index.js';
import { ids, openTestStore, requests } from './helpers.js';

let schema: TestSchema;
let owner: RequestStore;
let roles: TestRoles;

beforeAll(async () => {
  ({ schema, store: owner } = await openTestStore('pc_loud', 4));
  roles = testRoles(schema);
});
afterAll(async () => {
  await owner?.close();
  await roles?.drop();
  await schema?.drop();
});

async function runOn(dsn: string, queue: string) {
  const store = await RequestStore.open(dsn, { maxConns: 2, migrate: false });
  const logger = memoryLogger();
  const failures: PartitionWorkerFailure[] = [];
  const ac = new AbortController();
  const guard = setTimeout(() => ac.abort(), 30_000);
  const outcome = await runPartitionWorker({
    store,
    queue,
    concurrency: 2,
    batchSize: 4,
    leaseTtlMs: 600,
    drainTimeoutMs: 200,
    pollIntervalMs: 50,
    signal: ac.signal,
    logger,
    maxPersistentFailures: 3,
    onError: (f) => failures.push(f),
    handle: async () => ({ result: { route: 'never', payload: 'x' } }),
  }).then(
    () => ({ ok: true as const }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  clearTimeout(guard);
  await store.close();
  return { outcome, logger, failures, aborted: ac.signal.aborted };
}

it('a read-only role: the partition worker logs the error at once and stops with it', async () => {
  await owner.enqueue(requests('loud-ro', ids('ro', 10)));
  const dsn = await roles.readOnlyDsn('ro');
  const r = await runOn(dsn, 'loud-ro');
  expect(r.aborted).toBe(false); // it stopped by itself
  expect(r.outcome.ok).toBe(false);
  const err = (r.outcome as { err: unknown }).err as QError;
  expect(err).toBeInstanceOf(QError);
  expect(err.message).toMatch(/partition worker stopped after 3 identical (rebalance|poll) failures: read-only/);
  const first = r.logger.lines.find((l) => l.level === 'error');
  expect(first?.fields).toMatchObject({ kind: 'persistent', sqlstate: '25006', count: 1 });
  expect(r.failures.filter((f) => f.fatal)).toHaveLength(1);
});

it('a role without grants (permission denied) stops loudly', async () => {
  const dsn = await roles.noGrantsDsn('nogrant');
  const r = await runOn(dsn, 'loud-denied');
  expect(r.outcome.ok).toBe(false);
  expect(((r.outcome as { err: unknown }).err as QError).message).toMatch(/permission denied/);
  expect(r.logger.lines.find((l) => l.level === 'error')?.fields).toMatchObject({ kind: 'persistent', sqlstate: '42501' });
});

it('results that can never be written (INSERT on q_results revoked) stop the worker: not handled again for ever (issue 35 item 5)', async () => {
  await owner.enqueue(requests('loud-noinsert', ids('ni', 4)));
  const dsn = await roles.dsn('noinsert', (r) => [...roles.readWriteGrants(r), `REVOKE INSERT ON "${schema.name}".q_results FROM "${r}"`]);
  const store = await RequestStore.open(dsn, { maxConns: 2, migrate: false });
  const logger = memoryLogger();
  const ac = new AbortController();
  const guard = setTimeout(() => ac.abort(), 60_000);
  let handled = 0;
  const outcome = await runPartitionWorker({
    store,
    queue: 'loud-noinsert',
    concurrency: 1,
    batchSize: 1,
    leaseTtlMs: 600,
    drainTimeoutMs: 200,
    pollIntervalMs: 50,
    signal: ac.signal,
    logger,
    maxPersistentFailures: 3,
    handle: async (req) => {
      handled++;
      return { result: { route: 'loud-noinsert-out', payload: req.id } };
    },
  }).then(
    () => ({ ok: true as const }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  clearTimeout(guard);
  await store.close();
  expect(ac.signal.aborted).toBe(false); // it stopped by itself
  expect(outcome.ok).toBe(false);
  expect(((outcome as { err: unknown }).err as QError).message).toMatch(
    /partition worker stopped after 3 identical write failures: permission denied/,
  );
  // A permission error is not retried as a connection problem: one try per write, three writes.
  expect(logger.lines.filter((l) => l.msg === 'ack failed; retrying')).toEqual([]);
  expect(handled).toBeLessThanOrEqual(4);
});
