// JobQueue, the producer side, on real Postgres.
import { isQError } from '@q/schema';
import { JobStore } from '@q/store';
import { useJobStore } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { JobQueue, KNOWN_QUEUES } from '../src/index.js';

let store: JobStore;
let queue: JobQueue;

useJobStore(JobStore, { prefix: 'jqueue', maxConns: 4, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] }, (t) => {
  ({ store } = t);
  queue = new JobQueue(store, { knownQueues: [...KNOWN_QUEUES] });
});

const count = async () => (await store.pool.query('SELECT count(*)::int AS n FROM q_jobs_all')).rows[0].n as number;

describe('enqueue', () => {
  it('defaults to the default queue, payload {}, 5 attempts, queued', async () => {
    const job = await queue.enqueue({ type: 'server.validate' });
    expect(job).toMatchObject({ queue: 'default', type: 'server.validate', payload: {}, maxAttempts: 5, status: 'queued', attempt: 0 });
    expect(await queue.get(job.uuid)).toEqual(job);
    expect(await queue.get('00000000-0000-4000-8000-000000000000')).toBeNull();
  });

  it('an unknown queue is UNKNOWN_QUEUE and writes nothing', async () => {
    const err = await queue.enqueue({ queue: 'nope', type: 't' }).catch((e: unknown) => e);
    expect(isQError(err, 'UNKNOWN_QUEUE')).toBe(true);
    expect((err as Error).message).toBe(
      'queue: "nope" is not consumed by any worker (known: [default deploy backup cleanup notify maintenance webhook task])',
    );
    expect(await count()).toBe(0);
  });

  it('bad payloads and fields are INVALID_ARGUMENT; the payload is never quoted', async () => {
    const secret = 'hunter2-secret';
    for (const payload of [
      { secret, n: 1n },
      { secret, f: () => secret },
    ]) {
      const err = await queue.enqueue({ type: 't', payload }).catch((e: unknown) => e);
      expect(isQError(err, 'INVALID_ARGUMENT')).toBe(true);
      expect((err as Error).message).toContain('payload');
      expect((err as Error).message).not.toContain(secret);
    }
    const circular: Record<string, unknown> = { secret };
    circular.me = circular;
    await expect(queue.enqueue({ type: 't', payload: circular })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(queue.enqueue({ type: 't', maxAttempts: 0 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(queue.enqueue({ type: 't', maxAttempts: -1 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(queue.enqueue({ type: 5 as unknown as string })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(await count()).toBe(0);
  });

  it('an idempotency-key conflict in the same queue and type returns the original job unchanged; another type or queue makes a new job', async () => {
    const a = await queue.enqueue({ type: 'a', payload: { v: 1 }, idempotencyKey: 'deploy-42' });
    const b = await queue.enqueue({ type: 'a', payload: { v: 2 }, idempotencyKey: 'deploy-42' });
    expect(b).toEqual(a);
    const otherType = await queue.enqueue({ type: 'b', payload: { v: 3 }, idempotencyKey: 'deploy-42' });
    const otherQueue = await queue.enqueue({ queue: 'deploy', type: 'a', payload: { v: 4 }, idempotencyKey: 'deploy-42' });
    expect(new Set([a.uuid, otherType.uuid, otherQueue.uuid]).size).toBe(3);
    expect(await count()).toBe(3);
  });

  it('enqueueResult and enqueueManyResults say whether each job was created', async () => {
    const first = await queue.enqueueResult({ type: 'a', payload: { v: 1 }, idempotencyKey: 'r-1' });
    expect(first).toMatchObject({ created: true, job: { queue: 'default', type: 'a', payload: { v: 1 }, idempotencyKey: 'r-1' } });
    const again = await queue.enqueueResult({ type: 'a', payload: { v: 2 }, idempotencyKey: 'r-1' });
    expect(again).toEqual({ created: false, job: first.job });
    expect(await queue.enqueueResult({ type: 'plain' })).toMatchObject({ created: true, job: { type: 'plain' } });
    const many = await queue.enqueueManyResults([
      { type: 'a', idempotencyKey: 'r-1' },
      { type: 'b', idempotencyKey: 'r-1' },
      { type: 'b', idempotencyKey: 'r-1' },
      { type: 'c' },
    ]);
    expect(many.map((r) => r.created)).toEqual([false, true, false, true]);
    expect(many[0]!.job.uuid).toBe(first.job.uuid);
    expect(many[2]!.job).toEqual(many[1]!.job);
    expect(await count()).toBe(4);
    // Refused before anything is written, as enqueue and enqueueMany are.
    await expect(queue.enqueueResult({ type: '' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(queue.enqueueManyResults([{ type: 'ok' }, { queue: 'nope', type: 'bad' }])).rejects.toMatchObject({ code: 'UNKNOWN_QUEUE' });
    await expect(queue.enqueueManyResults([{ type: 'ok' }, { type: '' }])).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/type must be a non-empty string \(job 1\)$/),
    });
    expect(await count()).toBe(4);
  });

  it('concurrent enqueueResult calls with one key, queue and type: exactly one is created', async () => {
    const rs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => queue.enqueueResult({ type: 'race', payload: { i }, idempotencyKey: 'race-1' })),
    );
    expect(rs.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(rs.map((r) => r.job.uuid)).size).toBe(1);
    expect(await count()).toBe(1);
  });

  it('enqueueMany is all or none, in input order', async () => {
    await expect(queue.enqueueMany([{ type: 'ok' }, { queue: 'nope', type: 'bad' }])).rejects.toMatchObject({ code: 'UNKNOWN_QUEUE' });
    expect(await count()).toBe(0);
    const jobs = await queue.enqueueMany([
      { type: 'one', priority: 3 },
      { type: 'two', queue: 'backup', runAt: new Date(Date.now() + 60_000) },
    ]);
    expect(jobs.map((j) => [j.type, j.status])).toEqual([
      ['one', 'queued'],
      ['two', 'scheduled'],
    ]);
  });
});

describe('list, cancel, dead letter', () => {
  it('list pages with an opaque cursor', async () => {
    await queue.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ type: `t${i}`, teamId: 7 })));
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 5; page++) {
      const res = await queue.list({ teamId: 7, limit: 2, ...(cursor ? { cursor } : {}) });
      seen.push(...res.jobs.map((j) => j.type));
      if (!res.nextCursor) break;
      cursor = res.nextCursor;
    }
    expect(seen).toEqual(['t4', 't3', 't2', 't1', 't0']);
    await expect(queue.list({ cursor: 'not-a-cursor!' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: 'invalid cursor' });
    await expect(queue.list({ limit: 101 })).rejects.toMatchObject({ message: 'limit must be between 1 and 100' });
  });

  it('cancel: waiting jobs at once; finished ones not', async () => {
    const job = await queue.enqueue({ type: 't', runAt: new Date(Date.now() + 60_000) });
    expect(await queue.cancel(job.uuid)).toBe(true);
    expect((await queue.get(job.uuid))!.status).toBe('cancelled');
    expect(await queue.cancel(job.uuid)).toBe(false);
  });

  it('retryDeadLetter copies the job with retryOfId; forgetDeadLetter cancels it; others are INVALID_STATE/false', async () => {
    // Every field a retry must copy.
    const spec = {
      queue: 'deploy',
      type: 'deployment.run',
      payload: { id: 9 },
      priority: 4,
      maxAttempts: 1,
      lockKey: 'deploy:app:x',
      teamId: 3,
      resourceId: 11,
    };
    const orig = await queue.enqueue(spec);
    await expect(queue.retryDeadLetter(orig.uuid)).rejects.toMatchObject({ code: 'INVALID_STATE' });
    expect(await queue.forgetDeadLetter(orig.uuid)).toBe(false);
    const [l] = await store.claim({ queues: ['deploy'], workerId: 'w', limit: 1, leaseMs: 10_000 });
    await store.fail(l!, 'fatal', null);

    const retry = await queue.retryDeadLetter(orig.uuid, { idempotencyKey: 'retry-1' });
    expect(retry).toMatchObject({
      ...spec,
      retryOfId: orig.id,
      status: 'queued',
      attempt: 0,
      resumeCount: 0,
      idempotencyKey: 'retry-1',
    });
    expect(await queue.retryDeadLetter(orig.uuid, { idempotencyKey: 'retry-1' })).toEqual(retry);
    expect((await queue.get(orig.uuid))!.status).toBe('dead_letter');
    expect(await queue.forgetDeadLetter(orig.uuid)).toBe(true);
    expect((await queue.get(orig.uuid))!.status).toBe('cancelled');
    await expect(queue.retryDeadLetter('00000000-0000-4000-8000-000000000000')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('purgeFinished deletes finished jobs older than the given age', async () => {
    const job = await queue.enqueue({ type: 't' });
    await queue.cancel(job.uuid);
    expect(await queue.purgeFinished(60_000)).toBe(0);
    await store.pool.query(`UPDATE q_jobs_archive SET finished_at = now() - interval '2 minutes'`);
    expect(await queue.purgeFinished(60_000)).toBe(1);
    await expect(queue.purgeFinished(-1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
