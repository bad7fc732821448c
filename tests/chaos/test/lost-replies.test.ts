// Scenario 6: a worker reaches Postgres through a TCP proxy that lets a claim (and then two
// complete-and-claim round trips) commit but drops their replies. The jobs those statements
// leased, which the worker never saw, must go back to the queue well before their leases would
// lapse — no attempt lost, no crash counted, no handler run twice — and an outcome committed by a
// statement whose reply was lost must not be reported as unrecorded.
import { JobQueue, Worker } from '@q/job-worker';
import { JobStore } from '@q/store';
import { createTestSchema, memoryLogger, waitFor, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FaultProxy } from '../src/index.js';

const TOTAL = 300;
const LEASE_MS = 30_000;

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('chaos_lostreply');
});
afterAll(async () => {
  await schema.drop();
});

it('claim and complete-and-claim replies dropped after commit: every job runs once, attempt 1, long before a lease', async () => {
  const target = new URL(schema.dsn);
  const proxy = new FaultProxy({ host: target.hostname, port: Number(target.port || 5432) });
  const viaProxy = new URL(schema.dsn);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(await proxy.listen());
  const admin = await JobStore.open(schema.dsn, { maxConns: 2 });
  const store = await JobStore.open(viaProxy.toString(), { maxConns: 4, migrate: false });
  const logger = memoryLogger();
  const runs = new Map<string, number>();
  const worker = new Worker(store, {
    queues: ['task'],
    concurrency: 4,
    logger,
    leaseDurationMs: LEASE_MS,
    pollIntervalMs: 100,
    maintenanceIntervalMs: 200,
  });
  worker.register('chaos.reply', async (job) => {
    runs.set(job.uuid, (runs.get(job.uuid) ?? 0) + 1);
    await new Promise((r) => setTimeout(r, 2));
  });
  const ac = new AbortController();
  let run: Promise<void> | undefined;
  const startedAt = Date.now();
  try {
    await new JobQueue(admin, { knownQueues: ['task'] }).enqueueMany(
      Array.from({ length: TOTAL }, (_, i) => ({ queue: 'task', type: 'chaos.reply', payload: { i } })),
    );
    // The worker's first claim commits, its reply is lost.
    proxy.dropReplyTo('q_jobs_claim', 1);
    run = worker.run(ac.signal);
    await waitFor(() => proxy.drops >= 1, 20_000);
    // Then two round trips that write outcomes and claim in one statement.
    await waitFor(() => runs.size >= 20, 20_000);
    proxy.dropReplyTo('q_jobs_complete_claim', 2);
    await waitFor(() => proxy.drops >= 3, 20_000);
    // Well before one lease (30 s): stranded jobs would still be leased to the worker.
    const drained = await waitFor(async () => {
      const { rows } = await admin.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status <> 'succeeded'`);
      return rows[0]!.n === 0;
    }, LEASE_MS / 2).then(
      () => true,
      () => false,
    );
    const took = Date.now() - startedAt;
    const { rows } = await admin.pool.query<{ attempts: number[]; resumed: number }>(
      `SELECT array_agg(DISTINCT attempt) AS attempts, count(*) FILTER (WHERE resume_count > 0)::int AS resumed FROM q_jobs_all`,
    );
    const returned = logger.lines.filter((l) => /reply was lost returned to the queue/.test(l.msg ?? '')).length;
    const unrecorded = logger.lines.filter((l) => /could not record|not recorded/.test(l.msg ?? ''));
    const twice = [...runs].filter(([, n]) => n !== 1);
    console.log(
      `chaos lost-replies: ${TOTAL} jobs, ${proxy.drops} replies dropped, ${returned} reconciliations gave jobs back, drained ${drained} in ${took} ms ` +
        `(lease ${LEASE_MS} ms), attempts ${JSON.stringify(rows[0]!.attempts)}, ${rows[0]!.resumed} resumed, ${twice.length} jobs not run exactly once, ${unrecorded.length} outcomes logged unrecorded`,
    );
    expect(proxy.drops).toBe(3);
    expect(returned).toBeGreaterThan(0); // the fault bit: a lost claim had leased jobs
    expect(drained).toBe(true);
    expect(rows[0]!.attempts).toEqual([1]);
    expect(rows[0]!.resumed).toBe(0);
    expect(runs.size).toBe(TOTAL);
    expect(twice).toEqual([]);
    expect(unrecorded.map((l) => l.msg)).toEqual([]);
  } finally {
    ac.abort();
    await run?.catch(() => undefined);
    await worker.wait(5_000);
    await store.close();
    await admin.close();
    await proxy.close();
  }
});
