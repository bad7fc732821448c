// Scenario 1: a worker with one slot and a full local queue is SIGSTOPped, while a handler holds
// its slot, for twice the lease. A second worker reaps the lapsed leases and runs the jobs. When
// the first resumes, its handler returns and a slot frees up at once: none of its prefetched jobs
// (their leases long gone) may start. Every job runs exactly once, never two at once.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { JobQueue } from '@q/job-worker';
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Proc, logDir, sleep } from '../src/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const WORKER = path.join(here, '..', 'src', 'workers', 'lease-worker.ts');
const LEASE_MS = 3_000;
const PREFETCH = 8;

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('chaos_pause');
});
afterAll(async () => {
  await schema.drop();
});

interface Exec {
  job_uuid: string;
  start: number;
  end: number;
  pid: number;
}

function logLines<T>(file: string, msg: string): T[] {
  const out: T[] = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const rec = JSON.parse(line) as { msg?: string };
      if (rec.msg === msg) out.push(rec as T);
    } catch {
      /* a partial line */
    }
  }
  return out;
}

it('SIGSTOP past the lease with a full local queue: no prefetched job starts on a lapsed lease, each job runs once', async () => {
  const logs = logDir('paused-prefetch');
  const store = await JobStore.open(schema.dsn, { maxConns: 2 });
  const procs: Proc[] = [];
  try {
    const queue = new JobQueue(store, { knownQueues: ['task', 'block'] });
    // The blocking job goes first (priority) on a queue only the paused worker serves.
    await queue.enqueue({ queue: 'block', type: 'chaos.block', priority: 10, payload: { ms: 1_500 } });
    const tasks = await queue.enqueueMany(
      Array.from({ length: PREFETCH }, (_, i) => ({ queue: 'task', type: 'chaos.lease', payload: { ms: 50, i } })),
    );
    const env = { Q_DSN: schema.dsn, Q_LEASE_MS: String(LEASE_MS) };
    const a = new Proc(
      'a',
      WORKER,
      { ...env, Q_NAME: 'a', Q_QUEUES: 'block,task', Q_CONCURRENCY: '1', Q_PREFETCH: String(PREFETCH) },
      path.join(logs, 'a.log'),
    );
    procs.push(a);
    await a.waitFor(/"block started"/);
    a.signal('SIGSTOP');
    const stoppedAt = Date.now();
    const b = new Proc('b', WORKER, { ...env, Q_NAME: 'b', Q_CONCURRENCY: '4' }, path.join(logs, 'b.log'));
    procs.push(b);
    await b.waitFor(/"ready"/);
    // The second worker reaps the lapsed leases and runs every task while the first is paused.
    for (;;) {
      const { rows } = await store.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM q_jobs_all WHERE job_type = 'chaos.lease' AND status = 'succeeded'`,
      );
      if (rows[0]!.n === PREFETCH || Date.now() - stoppedAt > 60_000) break;
      await sleep(100);
    }
    const pausedMs = Math.max(0, 2 * LEASE_MS - (Date.now() - stoppedAt));
    await sleep(pausedMs);
    a.signal('SIGCONT');
    const resumedAt = Date.now();
    // Time for a stale start to show (and finish), then both stop.
    await sleep(1_500);
    for (const p of procs) p.signal('SIGTERM');
    await Promise.all(procs.map((p) => p.wait()));

    const execs = [...logLines<Exec>(path.join(logs, 'a.log'), 'exec'), ...logLines<Exec>(path.join(logs, 'b.log'), 'exec')];
    const byJob = new Map<string, Exec[]>();
    for (const e of execs) byJob.set(e.job_uuid, [...(byJob.get(e.job_uuid) ?? []), e]);
    const notOnce = tasks.filter((t) => byJob.get(t.uuid)?.length !== 1).map((t) => `${t.uuid}: ${JSON.stringify(byJob.get(t.uuid) ?? [])}`);
    const byA = execs.filter((e) => e.pid === a.child.pid).length;
    const { rows } = await store.pool.query<{ status: string; n: number }>(
      `SELECT status::text, count(*)::int AS n FROM q_jobs_all WHERE job_type = 'chaos.lease' GROUP BY 1`,
    );
    const returned = logLines<unknown>(
      path.join(logs, 'a.log'),
      'prefetched jobs whose leases ran out unstarted (event loop blocked or process paused?) returned to the queue',
    ).length;
    console.log(
      `chaos paused-prefetch: ${PREFETCH} prefetched jobs, worker paused ${resumedAt - stoppedAt} ms (lease ${LEASE_MS} ms), ` +
        `${execs.length} executions (${byA} by the paused worker), ${notOnce.length} jobs not run exactly once, give-backs logged ${returned}`,
    );
    expect(Object.fromEntries(rows.map((r) => [r.status, r.n]))).toEqual({ succeeded: PREFETCH });
    expect(notOnce).toEqual([]);
    expect(byA).toBe(0);
  } finally {
    for (const p of procs) {
      p.signal('SIGCONT');
      p.signal('SIGKILL');
    }
    await store.close();
  }
});
