// Issue 34 item 4: a row no maintenance statement can write (a scheduled job whose queue name is
// too long for the dequeue index, written by raw SQL) stopped every maintenance round for the
// table; now the round dead-letters it, the worker logs it at error level, and the rest runs.
import { randomBytes } from 'node:crypto';
import { JobStore } from '@q/store';
import { createTestSchema, memoryLogger, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Worker } from '../src/index.js';
import { waitFor } from './helpers.js';

let schema: TestSchema;
let store: JobStore;

beforeAll(async () => {
  schema = await createTestSchema('jwbadrow');
  store = await JobStore.open(schema.dsn, { maxConns: 4 });
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
});

it('a due job no promotion can queue is dead-lettered and logged at error level; the other due jobs run', async () => {
  const { rows } = await store.pool.query<{ uuid: string }>(
    `INSERT INTO q_jobs (queue, job_type, status, run_at) VALUES ($1, 't', 'scheduled', now() - interval '1 second') RETURNING uuid`,
    [randomBytes(1_536).toString('hex')],
  );
  const bad = rows[0]!.uuid;
  const due = await store.enqueue([
    { queue: 'default', type: 't', runAt: new Date(Date.now() + 200) },
    { queue: 'default', type: 't', runAt: new Date(Date.now() + 200) },
  ]);
  const logger = memoryLogger();
  const worker = new Worker(store, { queues: ['default'], concurrency: 2, logger, pollIntervalMs: 50, maintenanceIntervalMs: 100 });
  worker.register('t', async () => null);
  const ac = new AbortController();
  const run = worker.run(ac.signal);
  try {
    await waitFor(async () => {
      for (const j of due) if ((await store.get(j.uuid))?.status !== 'succeeded') return false;
      return true;
    }, 20_000);
  } finally {
    ac.abort();
    await run.catch(() => undefined);
    await worker.wait(5_000);
  }
  expect((await store.get(bad))?.status).toBe('dead_letter');
  const logged = logger.lines.filter((l) => l.msg === 'job maintenance could not write a job');
  expect(logged).toHaveLength(1);
  expect(logged[0]).toMatchObject({ level: 'error', fields: { job_uuid: bad, step: 'promote', dead_lettered: true } });
  expect(logger.lines.filter((l) => l.msg === 'job maintenance failed')).toEqual([]);
});
