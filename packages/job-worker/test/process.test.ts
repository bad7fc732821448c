// Crashes and drains of real worker processes: SIGKILL mid-job, the 4th crash, SIGTERM drain.
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { JobQueue, KNOWN_QUEUES, Worker } from '../src/index.js';
import { spawnWorker, waitFor, type WorkerProcess } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let queue: JobQueue;
const children: WorkerProcess[] = [];

beforeAll(async () => {
  schema = await createTestSchema('jwproc');
  store = await JobStore.open(schema.dsn, { maxConns: 6 });
  queue = new JobQueue(store, { knownQueues: [...KNOWN_QUEUES] });
});
afterAll(async () => {
  for (const c of children) c.child.kill('SIGKILL');
  await store?.close();
  await schema?.drop();
});
beforeEach(async () => {
  await store.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys');
});

async function start(env: Record<string, string>): Promise<WorkerProcess> {
  const p = await spawnWorker({ Q_DSN: schema.dsn, ...env });
  children.push(p);
  return p;
}

const runningBy = (uuid: string, workerId: string) => async () => {
  const j = await store.get(uuid);
  return j?.status === 'running' && j.leasedBy === workerId ? j : undefined;
};

it('a worker process SIGKILLed mid-job: the job is reaped after the lease and re-run elsewhere, attempt given back', async () => {
  const job = await queue.enqueue({ type: 'hang' });
  const a = await start({ Q_WORKER_ID: 'proc-a', Q_LEASE_MS: '1500' });
  await waitFor(runningBy(job.uuid, 'proc-a'));
  a.child.kill('SIGKILL');
  await a.exited;

  // Another process (this one) takes over maintenance and runs the job again.
  const ac = new AbortController();
  const b = new Worker(store, {
    queues: ['default'],
    concurrency: 1,
    workerId: 'proc-b',
    leaseDurationMs: 1500,
    maintenanceIntervalMs: 100,
    pollIntervalMs: 100,
  });
  const seen: number[] = [];
  b.register('hang', async (j) => {
    seen.push(j.attempt);
    return 'resumed';
  });
  const run = b.run(ac.signal);
  try {
    const done = await waitFor(async () => {
      const j = await store.get(job.uuid);
      return j?.status === 'succeeded' ? j : undefined;
    }, 30_000);
    expect(done).toMatchObject({ result: 'resumed', resumeCount: 1, attempt: 1, lastError: 'lease expired (worker crash or hang)' });
    expect(seen).toEqual([1]);
  } finally {
    ac.abort();
    await run;
    await b.wait(5_000);
  }
});

it('the 4th crash dead-letters the job (maxAttempts 1 survives three crashes)', async () => {
  const job = await queue.enqueue({ type: 'hang', maxAttempts: 1 });
  const expire = () => store.pool.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE uuid = $1`, [job.uuid]);
  // Crashes 1–3: claimers that vanish holding the lease (what a dead worker looks like to the
  // database); the lease lapses through the database clock instead of waiting for it.
  for (let crash = 1; crash <= 3; crash++) {
    const [l] = await store.claim({ queues: ['default'], workerId: `ghost-${crash}`, limit: 1, leaseMs: 60_000 });
    expect(l!.uuid).toBe(job.uuid);
    await store.markRunning([l!]);
    await expire();
    expect((await store.reapExpired()).map((r) => r.status)).toEqual(['retry_wait']);
    await store.promoteDue();
    expect(await store.get(job.uuid)).toMatchObject({ status: 'queued', attempt: 0, resumeCount: crash });
  }
  // Crash 4: a real worker process killed mid-job.
  const p = await start({ Q_WORKER_ID: 'crash-4', Q_LEASE_MS: '60000' });
  await waitFor(runningBy(job.uuid, 'crash-4'));
  p.child.kill('SIGKILL');
  await p.exited;
  await expire();
  expect((await store.reapExpired()).map((r) => r.status)).toEqual(['dead_letter']);
  const j = (await store.get(job.uuid))!;
  expect(j).toMatchObject({ status: 'dead_letter', attempt: 1, resumeCount: 4, leasedBy: null });
  expect(j.deadLetteredAt).not.toBeNull();
});

it('SIGTERM drain: a 2 s job finishing within the timeout records outcome and steps; one still running at the timeout goes back to the queue', async () => {
  const slow = await queue.enqueue({ type: 'slow' });
  const hang = await queue.enqueue({ type: 'hang' });
  const p = await start({ Q_WORKER_ID: 'drain', Q_DRAIN_MS: '6000' });
  await waitFor(runningBy(slow.uuid, 'drain'));
  await waitFor(runningBy(hang.uuid, 'drain'));
  await waitFor(() => p.output().includes(`started ${slow.uuid}`) && p.output().includes(`started ${hang.uuid}`));
  p.child.kill('SIGTERM');
  expect(await p.exited).toEqual({ code: 0, signal: null });
  expect(p.output()).toContain('aborted shutdown');

  const s = (await store.get(slow.uuid))!;
  expect(s).toMatchObject({ status: 'succeeded', result: { done: true }, attempt: 1, leasedBy: null });
  expect(s.steps.map((x) => [x.name, x.status, x.message])).toEqual([
    ['phase 1', 'succeeded', 'one'],
    ['phase 2', 'succeeded', 'two'],
  ]);
  const h = (await store.get(hang.uuid))!;
  expect(h).toMatchObject({ status: 'queued', attempt: 0, leasedBy: null, leaseExpiresAt: null, resumeCount: 0 });
  const { rows } = await store.pool.query(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status IN ('leased', 'running')`);
  expect(rows[0].n).toBe(0);
});
