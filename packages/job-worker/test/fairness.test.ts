// Fairness of the default (adaptive) local queue: two worker processes share a drain, and a
// worker whose handlers block neither takes new jobs from an idle peer nor sits on its local queue.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { JobQueue, Worker } from '../src/index.js';
import { waitFor } from './helpers.js';

const here = path.dirname(fileURLToPath(import.meta.url));
let schema: TestSchema;
let store: JobStore;
let queue: JobQueue;

beforeAll(async () => {
  schema = await createTestSchema('jwfair');
  store = await JobStore.open(schema.dsn, { maxConns: 6 });
  queue = new JobQueue(store, { knownQueues: ['default', 'probe'] });
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
});
beforeEach(async () => {
  await store.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys');
});

/** Starts test/fixtures/fair-worker.ts in its own process; resolves once it printed `ready`. */
async function fairWorker(id: string): Promise<{ stop(): Promise<number | null> }> {
  const child = spawn(process.execPath, ['--conditions=q-source', '--import', 'tsx', path.join(here, 'fixtures', 'fair-worker.ts')], {
    cwd: path.resolve(here, '../../..'),
    env: { ...process.env, Q_DSN: schema.dsn, Q_WORKER_ID: id },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await waitFor(() => out.includes('ready') || child.exitCode !== null, 60_000);
  if (!out.includes('ready')) throw new Error(`worker ${id} did not start: ${out}`);
  return {
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

it('two worker processes with default options started together on 10,000 jobs each run at least 35 %', async () => {
  const [a, b] = await Promise.all([fairWorker('fair-a'), fairWorker('fair-b')]);
  try {
    // Both are up and idle (listening): one enqueue wakes them at the same commit.
    await queue.enqueueMany(Array.from({ length: 10_000 }, (_, i) => ({ type: 'fair', payload: { i } })));
    await waitFor(
      async () => {
        const { rows } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'succeeded'`);
        return rows[0]!.n === 10_000;
      },
      120_000,
      100,
    );
  } finally {
    expect(await Promise.all([a.stop(), b.stop()])).toEqual([0, 0]);
  }
  const { rows } = await store.pool.query<{ by: string; n: number }>(
    `SELECT result->>'by' AS by, count(*)::int AS n FROM q_jobs_all GROUP BY 1 ORDER BY 1`,
  );
  expect(rows.map((r) => r.by)).toEqual(['fair-a', 'fair-b']);
  for (const r of rows) expect(r.n, `${r.by} ran ${r.n} of 10,000`).toBeGreaterThanOrEqual(3_500);
}, 180_000);

it('a job enqueued while a worker holds a local queue full of leased jobs is started by an idle worker within 50 ms; the stalled queue is given back', async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const busy = new Worker(store, {
    queues: ['default', 'probe'],
    concurrency: 2,
    workerId: 'busy',
    pollIntervalMs: 100,
    maintenanceIntervalMs: 60_000,
  });
  busy.register('quick', async () => null);
  busy.register('block', async () => gate);
  busy.register('probe', async () => 'busy ran it');
  const idle = new Worker(store, { queues: ['probe'], concurrency: 1, workerId: 'idle', pollIntervalMs: 60_000, maintenanceIntervalMs: 60_000 });
  let startedAt = 0;
  idle.register('probe', async () => {
    startedAt = performance.now();
    return 'idle ran it';
  });
  const ac = new AbortController();
  const runs = [busy.run(ac.signal)];
  try {
    // Quick jobs teach the busy worker's local queue that handlers are fast: it grows.
    await queue.enqueueMany(Array.from({ length: 300 }, () => ({ type: 'quick' })));
    await waitFor(
      async () =>
        (await store.list({ status: 'succeeded', limit: 100 })).jobs.length === 100 &&
        (await store.backlog()).every((b) => b.status !== 'queued'),
    );
    // Then blocking jobs: 2 run, the rest wait in its local queue, all leased by it.
    await queue.enqueueMany(Array.from({ length: 30 }, () => ({ type: 'block' })));
    await waitFor(async () => {
      const { rows } = await store.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM q_jobs_all WHERE job_type = 'block' AND leased_by = 'busy'`,
      );
      return rows[0]!.n === 30;
    });
    runs.push(idle.run(ac.signal));
    await new Promise((r) => setTimeout(r, 200)); // the idle worker is listening
    const t0 = performance.now();
    const probe = await queue.enqueue({ type: 'probe', queue: 'probe' });
    const done = await waitFor(
      async () => {
        const j = await store.get(probe.uuid);
        return j?.status === 'succeeded' ? j : undefined;
      },
      5_000,
      5,
    );
    expect(done.result).toBe('idle ran it');
    expect(startedAt - t0, 'started by the idle worker within 50 ms').toBeLessThan(50);
    // Stalled (every slot blocked), the busy worker gives its waiting jobs back: 2 stay running.
    await waitFor(async () => {
      const { rows } = await store.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM q_jobs_all WHERE job_type = 'block' AND status = 'queued'`,
      );
      return rows[0]!.n === 28;
    }, 5_000);
  } finally {
    release();
    ac.abort();
    await Promise.all(runs);
    await Promise.all([busy.wait(5_000), idle.wait(5_000)]);
  }
}, 60_000);
