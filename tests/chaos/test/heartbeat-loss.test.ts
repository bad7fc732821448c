// Scenario: four worker processes drain 2,000 jobs (3 % of them run longer than a lease)
// through a TCP proxy that, under load, cuts every connection sending a heartbeat for one lease
// period and a bit: no renewal gets through, every other statement does. Leases then lapse and
// are reaped, and the jobs are claimed again — often by the worker still running them. No job may
// ever run twice at once, and every job must end with exactly one recorded success.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { JobQueue } from '@q/job-worker';
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FaultProxy, PAYLOAD_SECRET, Proc, dsnWithPassword, findSecrets, logDir, rng, sleep } from '../src/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const WORKER = path.join(here, '..', 'src', 'workers', 'lease-worker.ts');
const TOTAL = 2_000;
const WORKERS = 4;
const LEASE_MS = 3_000;

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('chaos_hb');
});
afterAll(async () => {
  await schema.drop();
});

interface Exec {
  job_uuid: string;
  start: number;
  end: number;
  aborted: boolean;
  pid: number;
  name: string;
}

/** The JSON lines of every worker log with message `msg`. */
function logLines<T>(logs: string, msg: string): T[] {
  const out: T[] = [];
  for (const file of fs.readdirSync(logs)) {
    for (const line of fs.readFileSync(path.join(logs, file), 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const rec = JSON.parse(line) as { msg?: string };
        if (rec.msg === msg) out.push(rec as T);
      } catch {
        /* a partial line of a killed process */
      }
    }
  }
  return out;
}

it('heartbeats cut for one lease period under load: no job runs twice at once, each succeeds exactly once', async () => {
  const seed = Number(process.env.Q_CHAOS_SEED ?? Date.now() % 1_000_000);
  const rand = rng(seed);
  const logs = logDir('heartbeat-loss');
  const store = await JobStore.open(schema.dsn, { maxConns: 4 });
  const target = new URL(schema.dsn);
  const proxy = new FaultProxy({ host: target.hostname, port: Number(target.port || 5432) });
  const viaProxy = new URL(schema.dsn);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(await proxy.listen());
  const procs: Proc[] = [];
  try {
    const queue = new JobQueue(store, { knownQueues: ['task'] });
    // 3 % of the jobs outlive a lease (they need renewals) and go first (priority 1): a reaped one
    // is claimed again as soon as a slot frees up, not after the backlog. The rest are short.
    const durations = Array.from({ length: TOTAL }, () => (rand() < 0.03 ? 4_000 + Math.floor(rand() * 3_000) : 20 + Math.floor(rand() * 180)));
    for (let b = 0; b < TOTAL; b += 1_000) {
      await queue.enqueueMany(
        durations.slice(b, b + 1_000).map((ms) => ({
          queue: 'task',
          type: 'chaos.lease',
          maxAttempts: 8,
          priority: ms >= 4_000 ? 1 : 0,
          payload: { ms, secret: PAYLOAD_SECRET },
        })),
      );
    }
    for (let i = 0; i < WORKERS; i++) {
      procs.push(
        new Proc(
          `w${i}`,
          WORKER,
          { Q_DSN: dsnWithPassword(viaProxy.toString()), Q_NAME: `w${i}`, Q_LEASE_MS: String(LEASE_MS) },
          path.join(logs, `w${i}.log`),
        ),
      );
    }
    await Promise.all(procs.map((p) => p.waitFor(/"ready"/)));
    // Under load: every slot busy, the long jobs running, their leases renewed once.
    for (;;) {
      const { rows } = await store.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'running' AND priority = 1`,
      );
      if (rows[0]!.n >= 40) break;
      await sleep(50);
    }
    await sleep(1_200);
    const { rows: before } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'running'`);
    proxy.cutOn('q_jobs_heartbeat', LEASE_MS + 500);
    await sleep(LEASE_MS + 500);
    const until = Date.now() + 120_000;
    let left = TOTAL;
    while (Date.now() < until) {
      const { rows } = await store.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM q_jobs_all WHERE status NOT IN ('succeeded', 'dead_letter')`,
      );
      left = rows[0]!.n;
      if (left === 0) break;
      await sleep(250);
    }
    for (const p of procs) p.signal('SIGTERM');
    await Promise.all(procs.map((p) => p.wait()));

    const { rows: statuses } = await store.pool.query<{ status: string; n: number }>(
      `SELECT status::text, count(*)::int AS n FROM q_jobs_all GROUP BY 1`,
    );
    const counts = Object.fromEntries(statuses.map((r) => [r.status, r.n]));
    const { rows: reaped } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE resume_count > 0`);
    const givenBack = logLines<unknown>(logs, 'unrenewed job returned to the queue').length;
    const execs = logLines<Exec>(logs, 'exec');
    const successes = logLines<{ job_uuid: string }>(logs, 'job succeeded');
    // Two executions of one job overlapping in time (wall clock, one machine) ran at once.
    const byJob = new Map<string, Exec[]>();
    for (const e of execs) byJob.set(e.job_uuid, [...(byJob.get(e.job_uuid) ?? []), e]);
    const overlaps: string[] = [];
    for (const [uuid, list] of byJob) {
      list.sort((a, b) => a.start - b.start);
      for (let i = 1; i < list.length; i++) {
        if (list[i]!.start < list[i - 1]!.end) {
          overlaps.push(
            `job ${uuid}: pid ${list[i - 1]!.pid} ran ${list[i - 1]!.start}–${list[i - 1]!.end}, pid ${list[i]!.pid} started ${list[i]!.start}`,
          );
        }
      }
    }
    const successCount = new Map<string, number>();
    for (const s of successes) successCount.set(s.job_uuid, (successCount.get(s.job_uuid) ?? 0) + 1);
    const notOnce = [...successCount].filter(([, n]) => n !== 1);
    const aborted = execs.filter((e) => e.aborted).length;
    console.log(
      `chaos heartbeat-loss: seed ${seed}, ${TOTAL} jobs (${JSON.stringify(counts)}), ${before[0]!.n} running at the cut, ` +
        `${proxy.cuts} heartbeat connections cut, ${givenBack} unrenewed jobs given back, ${reaped[0]!.n} reaped, ${execs.length} executions (${aborted} aborted), ` +
        `${overlaps.length} overlapping, ${notOnce.length} jobs not logged as succeeded exactly once`,
    );
    expect(proxy.cuts).toBeGreaterThan(0);
    expect(execs.length).toBeGreaterThan(TOTAL); // leases were lost and jobs ran again: the fault bit
    expect(overlaps.slice(0, 10)).toEqual([]);
    expect(left).toBe(0);
    expect(counts).toEqual({ succeeded: TOTAL });
    expect(successCount.size).toBe(TOTAL);
    expect(notOnce.slice(0, 10)).toEqual([]);
    expect(findSecrets(logs)).toEqual([]);
  } finally {
    for (const p of procs) p.signal('SIGKILL');
    await proxy.close();
    await store.close();
  }
});
