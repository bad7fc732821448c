// Per-group concurrency limits across real worker processes (#40): four processes share 400 jobs
// over 5 groups without ever running more than the limit of a group at once, counted by the
// handlers themselves; a SIGKILLed worker's slots stay taken until its leases lapse, then free.
import { JobStore } from '@q/store';
import { createTestSchema, sleep, type TestSchema } from '@q/testing';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { JobQueue } from '../src/index.js';
import { spawnWorker, waitFor, type WorkerProcess } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let queue: JobQueue;
let children: WorkerProcess[] = [];

beforeAll(async () => {
  schema = await createTestSchema('jwgroupp');
  store = await JobStore.open(schema.dsn, { maxConns: 4 });
  queue = new JobQueue(store, { knownQueues: ['default'] });
  await store.pool.query('CREATE TABLE group_running (grp text PRIMARY KEY, running int NOT NULL, peak int NOT NULL)');
  await store.pool.query(
    'CREATE TABLE group_starts (job_id bigint NOT NULL, grp text, worker text NOT NULL, at timestamptz NOT NULL, claimed timestamptz NOT NULL)',
  );
});
afterEach(async () => {
  for (const c of children) c.child.kill('SIGKILL');
  await Promise.all(children.map((c) => c.exited));
  children = [];
  await store.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys, q_job_rate_slots, group_running, group_starts');
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
});

async function start(id: string, env: Record<string, string> = {}): Promise<WorkerProcess> {
  const p = await spawnWorker({ Q_DSN: schema.dsn, Q_WORKER_ID: id, ...env }, 'group-worker.ts');
  children.push(p);
  return p;
}

const succeeded = async (): Promise<number> =>
  (await store.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM q_jobs_archive WHERE status = 'succeeded'")).rows[0]!.n;

it('four processes, 400 jobs over 5 groups, concurrency 2 per group: no group ever runs more than 2, and all 400 finish', async () => {
  await queue.enqueueMany(Array.from({ length: 400 }, (_, i) => ({ type: 'run', group: `tenant:${i % 5}`, payload: { ms: 15 } })));
  await Promise.all([0, 1, 2, 3].map((i) => start(`groups-${i}`, { Q_GROUP_LIMIT: '2', Q_CONCURRENCY: '8' })));
  await waitFor(async () => (await succeeded()) === 400, 90_000);
  const { rows } = await store.pool.query<{ grp: string; running: number; peak: number }>(
    'SELECT grp, running, peak FROM group_running ORDER BY grp',
  );
  expect(rows.map((r) => r.grp)).toEqual(['tenant:0', 'tenant:1', 'tenant:2', 'tenant:3', 'tenant:4']);
  for (const r of rows) expect(r, r.grp).toMatchObject({ running: 0, peak: 2 });
  // The jobs were shared by the processes, not run by one.
  const { rows: by } = await store.pool.query<{ n: number }>('SELECT count(DISTINCT worker)::int AS n FROM group_starts');
  expect(by[0]!.n).toBeGreaterThan(1);
});

it('four processes, rate 10 per 1 s per group: no sliding second holds more than 10 starts of a group, and all jobs finish', async () => {
  await queue.enqueueMany(Array.from({ length: 90 }, (_, i) => ({ type: 'run', group: `tenant:${i % 3}`, payload: { ms: 5 } })));
  await Promise.all([0, 1, 2, 3].map((i) => start(`rate-${i}`, { Q_GROUP_RATE: '10/1000' })));
  await waitFor(async () => (await succeeded()) === 90, 60_000);
  const { rows } = await store.pool.query<{ grp: string; claimed: Date }>('SELECT grp, claimed FROM group_starts ORDER BY grp, claimed');
  for (const g of ['tenant:0', 'tenant:1', 'tenant:2']) {
    const times = rows.filter((r) => r.grp === g).map((r) => r.claimed.getTime());
    expect(times, g).toHaveLength(30);
    // More than 1,000 ms apart on the database's microsecond clock: at least 1,000 in whole ms.
    for (let i = 10; i < times.length; i++) expect(times[i]! - times[i - 10]!, `${g}: starts ${i - 10}..${i}`).toBeGreaterThanOrEqual(1_000);
  }
});

it("a worker SIGKILLed while holding a group's slots: they count until its leases lapse, then free; nothing is lost", async () => {
  const LEASE_MS = 3_000;
  const held = await queue.enqueueMany([0, 1].map(() => ({ type: 'hold', group: 'g', payload: {} })));
  const a = await start('groups-a', { Q_GROUP_LIMIT: '2', Q_LEASE_MS: String(LEASE_MS) });
  await waitFor(() => (a.output().match(/holding/g) ?? []).length === 2, 20_000);
  // Jobs of the same group enqueued now wait for the slots the holder took.
  const waiting = await queue.enqueueMany([0, 1].map(() => ({ type: 'run', group: 'g', payload: { ms: 10 } })));
  a.child.kill('SIGKILL');
  await a.exited;
  const { rows } = await store.pool.query<{ until: Date }>('SELECT max(lease_expires_at) AS until FROM q_jobs WHERE id = ANY($1)', [
    held.map((j) => j.id),
  ]);
  const lapse = rows[0]!.until;
  await start('groups-b', { Q_GROUP_LIMIT: '2', Q_LEASE_MS: String(LEASE_MS) });
  await sleep(1_000);
  // Only starts before the lapse break the limit: a process slow to start (a loaded machine) may
  // see the leases lapse first, and may then start the group's jobs (checked below, after the lapse).
  const early = await store.pool.query('SELECT 1 FROM group_starts WHERE job_id = ANY($1) AND at < $2', [waiting.map((j) => j.id), lapse]);
  expect(early.rowCount, 'a job of the group started while the dead worker still held its slots').toBe(0);
  // The dead worker's jobs are reaped after their leases lapse and run again; all four finish.
  await waitFor(async () => (await succeeded()) === 4, 30_000);
  const { rows: starts } = await store.pool.query<{ job_id: string; at: Date }>('SELECT job_id, at FROM group_starts WHERE job_id = ANY($1)', [
    waiting.map((j) => j.id),
  ]);
  expect(starts).toHaveLength(2);
  for (const s of starts) expect(s.at.getTime()).toBeGreaterThanOrEqual(lapse.getTime());
});
