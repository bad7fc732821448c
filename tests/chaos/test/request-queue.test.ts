// Scenario 1: three dispatchers serve 10,000 requests while random ones are SIGKILLed and
// restarted every few hundred ms. Every request must end with exactly one result, and no
// result may come from an owner whose lease epoch was taken over.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { RequestStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PAYLOAD_SECRET, Proc, dsnWithPassword, findSecrets, logDir, rng, sleep } from '../src/index.js';
import { requestQueueViolations } from '../src/invariants.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const WORKER = path.join(here, '..', 'src', 'workers', 'request-worker.ts');
const TOTAL = 10_000;
const CHAOS_MS = 6_000;

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('chaos_rq');
});
afterAll(async () => {
  await schema.drop();
});

it('request queue: random SIGKILLs and restarts lose nothing and never double-ack', async () => {
  const seed = Number(process.env.Q_CHAOS_SEED ?? Date.now() % 1_000_000);
  const rand = rng(seed);
  const logs = logDir('request-queue');
  const store = await RequestStore.open(schema.dsn, { maxConns: 4 });
  const ids: string[] = [];
  try {
    const deadline = Math.floor(Date.now() / 1000) + 3600;
    for (let b = 0; b < TOTAL / 1000; b++) {
      const batch = Array.from({ length: 1000 }, (_, i) => {
        const id = `chaos-${b}-${i}`;
        ids.push(id);
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

    let generation = 0;
    const spawnOne = (slot: number) =>
      new Proc(`d${slot}`, WORKER, { Q_DSN: dsnWithPassword(schema.dsn), Q_OWNER: `d${slot}-g${generation++}` }, path.join(logs, `d${slot}.log`));
    const procs = [0, 1, 2].map(spawnOne);
    await Promise.all(procs.map((p) => p.waitFor(/"ready"/)));

    let kills = 0;
    const chaosEnd = Date.now() + CHAOS_MS;
    while (Date.now() < chaosEnd) {
      await sleep(200 + Math.floor(rand() * 400));
      const slot = Math.floor(rand() * procs.length);
      procs[slot]!.signal('SIGKILL');
      await procs[slot]!.wait();
      kills += 1;
      procs[slot] = spawnOne(slot);
    }
    // Let the survivors finish; lapsed leases are taken over after the TTL.
    const until = Date.now() + 90_000;
    while (Date.now() < until) {
      const { rows } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_requests WHERE queue = 'chaos'`);
      if (rows[0]!.n === 0) break;
      await sleep(250);
    }
    for (const p of procs) p.signal('SIGTERM');
    await Promise.all(procs.map((p) => p.wait()));

    const violations = await requestQueueViolations(schema.dsn, ids);
    console.log(`chaos request-queue: seed ${seed}, ${TOTAL} requests, ${kills} SIGKILLs, ${violations.length} invariant violations`);
    expect(violations).toEqual([]);
    expect(findSecrets(logs)).toEqual([]);
  } finally {
    await store.close();
  }
});
