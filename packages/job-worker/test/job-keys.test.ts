// Job keys through JobQueue.open (#39 item 1): replace, debounce and throttle on enqueue,
// enqueueResult and enqueueMany; a running job is left alone and the new one runs after it with
// the latest payload; two queues (two pools) enqueueing one key at once make one job — on real
// Postgres.
import { QErrorCode, isQError } from '@q/schema';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobQueue } from '../src/index.js';
import { waitFor } from './helpers.js';

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('jqkeys');
});
afterAll(() => schema.drop());

describe('JobQueue job keys', () => {
  it('replace updates the pending job; debounce keeps its time; throttle returns the window job', async () => {
    const queue = await JobQueue.open(schema.dsn);
    try {
      const later = new Date(Date.now() + 3_600_000);
      const a = await queue.enqueueResult({ type: 'r', payload: { v: 1 }, runAt: later, jobKey: 'k' });
      const b = await queue.enqueueResult({
        type: 'r',
        payload: { v: 2 },
        priority: 3,
        runAt: new Date(later.getTime() + 5000),
        jobKey: 'k',
        jobKeyMode: 'debounce',
      });
      expect(a.created).toBe(true);
      expect(b).toMatchObject({ created: false, job: { id: a.job.id, payload: { v: 2 }, priority: 3, status: 'scheduled', jobKey: 'k' } });
      expect(b.job.runAt.getTime()).toBe(later.getTime());
      const c = await queue.enqueueResult({ type: 'r', payload: { v: 3 }, jobKey: 'k', jobKeyMode: 'replace' });
      expect(c).toMatchObject({ created: false, job: { id: a.job.id, payload: { v: 3 }, status: 'queued' } });
      expect(await queue.get(a.job.uuid)).toMatchObject({ payload: { v: 3 }, status: 'queued', jobKey: 'k' });

      const t = await queue.enqueueMany([
        { type: 't', jobKey: 'tk', jobKeyMode: 'throttle', throttleMs: 2_147_483_647, payload: { n: 1 } },
        { type: 't', jobKey: 'tk', jobKeyMode: 'throttle', throttleMs: 2_147_483_647, payload: { n: 2 } },
      ]);
      expect(t[0]!.id).toBe(t[1]!.id);
      const t2 = await queue.enqueue({ type: 't', jobKey: 'tk', jobKeyMode: 'throttle', throttleMs: 2_147_483_647 });
      expect(t2).toMatchObject({ id: t[0]!.id, payload: { n: 1 }, jobKey: 'tk', idempotencyKey: null });
    } finally {
      await queue.close();
    }
  });

  it('a running job is left alone: the new job is queued after it and runs with the latest payload', async () => {
    const queue = await JobQueue.open(schema.dsn, { worker: { pollIntervalMs: 50 } });
    try {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let started!: () => void;
      const running = new Promise<void>((r) => (started = r));
      const seen: unknown[] = [];
      queue.work(
        'sync',
        async (job) => {
          seen.push(job.payload);
          if (seen.length === 1) {
            started();
            await gate;
          }
        },
        { queue: 'keys' },
      );
      const first = await queue.enqueue({ queue: 'keys', type: 'sync', payload: { v: 1 }, jobKey: 'user-1' });
      await running;
      const second = await queue.enqueueResult({
        queue: 'keys',
        type: 'sync',
        payload: { v: 2 },
        jobKey: 'user-1',
        runAt: new Date(Date.now() + 300),
      });
      const third = await queue.enqueueResult({ queue: 'keys', type: 'sync', payload: { v: 3 }, jobKey: 'user-1', jobKeyMode: 'debounce' });
      expect(second.created).toBe(true);
      expect(second.job.id).not.toBe(first.id);
      expect(third).toMatchObject({ created: false, job: { id: second.job.id, payload: { v: 3 }, status: 'scheduled' } });
      expect((await queue.get(first.uuid))!.status).toBe('running');
      release();
      await waitFor(async () => (await queue.get(second.job.uuid))?.status === 'succeeded');
      expect(seen).toEqual([{ v: 1 }, { v: 3 }]);
    } finally {
      await queue.close();
    }
  });

  it('two queues (two pools) enqueueing one key at once make one job, five times over', async () => {
    const [q1, q2] = await Promise.all([JobQueue.open(schema.dsn), JobQueue.open(schema.dsn)]);
    try {
      for (const mode of ['replace', 'debounce', 'throttle'] as const) {
        for (let round = 0; round < 5; round++) {
          const opts = {
            queue: 'race',
            type: 'x',
            jobKey: `${mode}-${round}`,
            jobKeyMode: mode,
            ...(mode === 'throttle' ? { throttleMs: 2_147_483_647 } : {}),
          };
          const rs = await Promise.all([q1.enqueueResult({ ...opts, payload: { by: 1 } }), q2.enqueueResult({ ...opts, payload: { by: 2 } })]);
          expect(rs.filter((r) => r.created)).toHaveLength(1);
          expect(rs[0]!.job.id).toBe(rs[1]!.job.id);
        }
      }
    } finally {
      await Promise.all([q1.close(), q2.close()]);
    }
  });

  it('bad options are INVALID_ARGUMENT and write nothing', async () => {
    const queue = await JobQueue.open(schema.dsn);
    try {
      for (const opts of [
        { type: 'b', jobKey: 'k', jobKeyMode: 'throttle' as const },
        { type: 'b', jobKey: 'k', idempotencyKey: 'i' },
        { type: 'b', jobKey: 'k', jobKeyMode: 'sometimes' as unknown as 'replace' },
      ]) {
        const err = await queue.enqueue(opts).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(isQError(err) && err.code === QErrorCode.INVALID_ARGUMENT).toBe(true);
      }
      expect((await queue.list({ type: 'b' })).jobs).toEqual([]);
    } finally {
      await queue.close();
    }
  });
});
