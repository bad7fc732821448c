// Scenario 6: a transaction pins the vacuum horizon for 60 s while the job queue runs at full
// speed. Prints throughput and dead tuples before, during and after; the queue must keep working
// and drain completely once the horizon is released. (A figure, not a speed threshold.)
import { JobQueue } from '@q/job-worker';
import { migrate } from '@q/schema';
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { findSecrets, deadTuples, logDir, pinVacuumHorizon, sleep, spawnWorkload, waitDrained, workloadViolations } from '../src/index.js';

const PIN_MS = Number(process.env.Q_CHAOS_PIN_MS ?? 60_000);
const PHASE_MS = 10_000;

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('chaos_vac');
});
afterAll(async () => {
  await schema.drop();
});

it('held vacuum horizon: the job queue keeps working (throughput and dead tuples reported)', async () => {
  const store = await JobStore.open(schema.dsn, { maxConns: 2 });
  await migrate(store.pool, { modules: ['requests'] }); // the shared invariant checks read both queues
  await store.pool.query('CREATE TABLE chaos_effects (job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL)');
  const queue = new JobQueue(store, { knownQueues: ['task'] });
  const logs = logDir('vacuum-horizon');
  const procs = spawnWorkload(schema.dsn, logs, 0, 2, { Q_FAIL_RATE: '0' });
  let enqueued = 0;
  let producing = true;
  const producer = (async () => {
    while (producing) {
      const { rows } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'queued'`);
      if (rows[0]!.n < 4_000) {
        await queue.enqueueMany(Array.from({ length: 1000 }, () => ({ queue: 'task', type: 'chaos.job' })));
        enqueued += 1000;
      } else await sleep(50);
    }
  })();
  const succeeded = async () =>
    (await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'succeeded'`)).rows[0]!.n;
  const phase = async (ms: number) => {
    const a = await succeeded();
    const t = Date.now();
    await sleep(ms);
    return { perSec: Math.round(((await succeeded()) - a) / ((Date.now() - t) / 1000)), dead: await deadTuples(schema.dsn, 'q_jobs') };
  };
  try {
    await Promise.all(procs.map((p) => p.waitFor(/"ready"/)));
    await sleep(2_000);
    const before = await phase(PHASE_MS);
    const pin = await pinVacuumHorizon(schema.dsn);
    let during;
    try {
      during = await phase(PIN_MS);
    } finally {
      await pin.release();
    }
    const after = await phase(PHASE_MS);
    producing = false;
    await producer;
    const drained = await waitDrained(schema.dsn, 120_000);
    for (const p of procs) p.signal('SIGTERM');
    await Promise.all(procs.map((p) => p.wait()));
    const violations = await workloadViolations(schema.dsn, { requestIds: [], jobs: enqueued });
    console.log(
      `chaos vacuum-horizon: ${enqueued} jobs; jobs/s before ${before.perSec}, during a ${PIN_MS / 1000} s pinned horizon ${during.perSec}, after ${after.perSec}; ` +
        `dead tuples in jobs ${before.dead} → ${during.dead} → ${after.dead}; ${violations.length} invariant violations`,
    );
    expect(during.perSec).toBeGreaterThan(0);
    expect(drained).toBe(true);
    expect(violations).toEqual([]);
    expect(findSecrets(logs)).toEqual([]);
  } finally {
    producing = false;
    for (const p of procs) p.signal('SIGKILL');
    await producer.catch(() => undefined);
    await store.close();
  }
});
