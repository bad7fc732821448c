import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { JobQueue } from '@q/job-worker';
import { JobStore, RequestStore } from '@q/store';
import pg from 'pg';
import { jobQueueViolations, requestQueueViolations } from './invariants.js';
import { Proc, sleep } from './procs.js';
import { PAYLOAD_SECRET, dsnWithPassword } from './secrets.js';

const workers = path.join(path.dirname(fileURLToPath(import.meta.url)), 'workers');

/** Request ids and job count of a mixed workload. */
export interface Workload {
  requestIds: string[];
  jobs: number;
}

/** Enqueues `requests` requests on queue "chaos" and `jobs` jobs of type chaos.job. */
export async function seedWorkload(dsn: string, requests: number, jobs: number): Promise<Workload> {
  const store = await RequestStore.open(dsn, { maxConns: 2 });
  const jobStore = await JobStore.open(dsn, { maxConns: 2 });
  try {
    await jobStore.pool.query('CREATE TABLE IF NOT EXISTS chaos_effects (job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL)');
    const deadline = Math.floor(Date.now() / 1000) + 3600;
    const requestIds: string[] = [];
    for (let done = 0; done < requests; done += 1000) {
      const batch = Array.from({ length: Math.min(1000, requests - done) }, (_, i) => {
        const id = `mix-${done + i}`;
        requestIds.push(id);
        return {
          id,
          token: randomBytes(8).toString('hex'),
          queue: 'chaos',
          deadline,
          envelope: '{}',
          payload: Buffer.from(`${PAYLOAD_SECRET}:${id}`),
        };
      });
      await store.enqueue(batch);
    }
    const queue = new JobQueue(jobStore, { knownQueues: ['task'] });
    for (let done = 0; done < jobs; done += 1000) {
      await queue.enqueueMany(
        Array.from({ length: Math.min(1000, jobs - done) }, () => ({
          queue: 'task',
          type: 'chaos.job',
          maxAttempts: 8,
          payload: { secret: PAYLOAD_SECRET },
        })),
      );
    }
    return { requestIds, jobs };
  } finally {
    await store.close();
    await jobStore.close();
  }
}

/** Starts `dispatchers` request-queue processes and `jobWorkers` job-worker processes. */
export function spawnWorkload(plainDsn: string, logs: string, dispatchers: number, jobWorkers: number, env: Record<string, string> = {}): Proc[] {
  const dsn = dsnWithPassword(plainDsn);
  const procs: Proc[] = [];
  for (let i = 0; i < dispatchers; i++) {
    procs.push(
      new Proc(`d${i}`, path.join(workers, 'request-worker.ts'), { Q_DSN: dsn, Q_OWNER: `d${i}`, ...env }, path.join(logs, `d${i}.log`)),
    );
  }
  for (let i = 0; i < jobWorkers; i++) {
    procs.push(
      new Proc(
        `w${i}`,
        path.join(workers, 'job-worker.ts'),
        { Q_DSN: dsn, Q_NAME: `w${i}`, Q_FAIL_RATE: '0.05', ...env },
        path.join(logs, `w${i}.log`),
      ),
    );
  }
  return procs;
}

/** Waits until no request is left and every job is terminal, or `timeoutMs` passed. */
export async function waitDrained(dsn: string, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const c = new pg.Client({ connectionString: dsn });
    c.on('error', () => undefined); // the server may crash under it: its query fails, the process must not
    try {
      await c.connect();
      const { rows } = await c.query<{ left: number }>(
        `SELECT (SELECT count(*) FROM q_requests)::int + (SELECT count(*) FROM q_jobs_all WHERE status NOT IN ('succeeded', 'dead_letter'))::int AS left`,
      );
      if (rows[0]?.left === 0) return true;
    } catch {
      /* the server may be restarting */
    } finally {
      await c.end().catch(() => undefined);
    }
    await sleep(250);
  }
  return false;
}

/** Every invariant of both queues. */
export async function workloadViolations(dsn: string, w: Workload, killedPids = new Set<number>()): Promise<string[]> {
  const requests = await requestQueueViolations(dsn, w.requestIds);
  const { problems, counts } = await jobQueueViolations(dsn, killedPids);
  const total = (counts.succeeded ?? 0) + (counts.dead_letter ?? 0);
  if (total !== w.jobs) problems.push(`${total} of ${w.jobs} jobs terminal`);
  return [...requests, ...problems];
}
