// Scenario 2: four worker processes drain 10,000 jobs that fail 10 % of their attempts while
// random workers are SIGKILLed and replaced. Every job ends succeeded or dead_letter, none stays
// leased/running, and no job succeeds twice.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { JobQueue } from '@q/job-worker';
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PAYLOAD_SECRET, Proc, dsnWithPassword, findSecrets, logDir, rng, sleep } from '../src/index.js';
import { jobQueueViolations } from '../src/invariants.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const WORKER = path.join(here, '..', 'src', 'workers', 'job-worker.ts');
const TOTAL = 10_000;
const CHAOS_MS = 6_000;

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('chaos_jobs');
});
afterAll(async () => {
  await schema.drop();
});

it('job queue: random SIGKILLs lose no job and never let one succeed twice', async () => {
  const seed = Number(process.env.Q_CHAOS_SEED ?? Date.now() % 1_000_000);
  const rand = rng(seed);
  const logs = logDir('job-queue');
  const store = await JobStore.open(schema.dsn, { maxConns: 4 });
  await store.pool.query('CREATE TABLE chaos_effects (job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL)');
  const queue = new JobQueue(store, { knownQueues: ['task'] });
  try {
    for (let b = 0; b < TOTAL / 1000; b++) {
      await queue.enqueueMany(
        Array.from({ length: 1000 }, (_, i) => ({
          queue: 'task',
          type: 'chaos.job',
          payload: { n: b * 1000 + i, secret: PAYLOAD_SECRET },
          maxAttempts: 8,
        })),
      );
    }
    const killed = new Set<number>();
    const spawnOne = (slot: number) =>
      new Proc(`w${slot}`, WORKER, { Q_DSN: dsnWithPassword(schema.dsn), Q_NAME: `w${slot}` }, path.join(logs, `w${slot}.log`));
    const procs = [0, 1, 2, 3].map(spawnOne);
    await Promise.all(procs.map((p) => p.waitFor(/"ready"/)));
    const chaosEnd = Date.now() + CHAOS_MS;
    while (Date.now() < chaosEnd) {
      await sleep(300 + Math.floor(rand() * 500));
      const slot = Math.floor(rand() * procs.length);
      const pid = procs[slot]!.child.pid!;
      procs[slot]!.signal('SIGKILL');
      await procs[slot]!.wait();
      killed.add(pid);
      procs[slot] = spawnOne(slot);
    }
    const until = Date.now() + 120_000;
    while (Date.now() < until) {
      const { rows } = await store.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM q_jobs_all WHERE status NOT IN ('succeeded', 'dead_letter')`,
      );
      if (rows[0]!.n === 0) break;
      await sleep(250);
    }
    for (const p of procs) p.signal('SIGTERM');
    await Promise.all(procs.map((p) => p.wait()));
    const { problems, counts } = await jobQueueViolations(schema.dsn, killed);
    console.log(
      `chaos job-queue: seed ${seed}, ${TOTAL} jobs (${JSON.stringify(counts)}), ${killed.size} SIGKILLs, ${problems.length} invariant violations`,
    );
    expect(problems).toEqual([]);
    expect(findSecrets(logs)).toEqual([]);
    expect((counts.succeeded ?? 0) + (counts.dead_letter ?? 0)).toBe(TOTAL);
  } finally {
    await store.close();
  }
});
