// Outcomes the store refuses (a result JSON cannot carry faithfully, an error text with NUL or a
// lone surrogate): the worker records a failed attempt or a repaired error instead of losing the
// outcome (which left the job `running` until its lease lapsed), and the batch it rides in with
// other finished attempts is still written. Real Postgres.
import { JobStore, type Job } from '@q/store';
import { expect, it } from 'vitest';
import { Completer } from '../src/completer.js';
import type { JobQueue } from '../src/index.js';
import { memoryLogger, jobInStatus, useWorkerTests, waitFor } from './helpers.js';

let store: JobStore;
let queue: JobQueue;
const { startWorker } = useWorkerTests(
  'jworker_unstorable',
  { concurrency: 8, leaseDurationMs: 3_000, retryBaseMs: 50 },
  (t) => ({ store, queue } = t),
);

const statusOf = (uuid: string, status: Job['status']) => jobInStatus(store, uuid, status);

it('a handler returning a Map: a failed attempt saying why, retried, then dead-lettered; its batch neighbours succeed', async () => {
  const logs = memoryLogger();
  const attempts: number[] = [];
  // Every handler waits for the same moment, so their outcomes reach the store together.
  const gate = new Promise((r) => setTimeout(r, 300));
  startWorker({ logger: logs }, (w) => {
    w.register('map', async (j) => {
      attempts.push(j.attempt);
      await gate;
      return new Map([[1, 2]]);
    });
    w.register('ok', async (j) => {
      await gate;
      return { i: (j.payload as { i: number }).i };
    });
  });
  const bad = await queue.enqueue({ type: 'map', maxAttempts: 2 });
  const good = await queue.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ type: 'ok', payload: { i } })));
  const dead = await waitFor(statusOf(bad.uuid, 'dead_letter'));
  expect(dead).toMatchObject({
    attempt: 2,
    lastError: "the handler's result cannot be stored: result contains a Map, which JSON cannot represent (it would be stored as something else)",
    result: null,
    leasedBy: null,
  });
  expect(attempts).toEqual([1, 2]);
  for (const [i, g] of good.entries()) {
    expect(await waitFor(statusOf(g.uuid, 'succeeded'))).toMatchObject({ attempt: 1, result: { i } });
  }
  expect(logs.lines.filter((l) => /could not record/.test(l.msg ?? ''))).toEqual([]);
});

it('a handler returning a string with NUL: a failed attempt (retry_wait, then dead letter), the value never in the message', async () => {
  const secret = 'sec\u0000ret-value';
  const gate = new Promise((r) => setTimeout(r, 300));
  startWorker({ retryBaseMs: 60_000 }, (w) => {
    w.register('nul', async () => {
      await gate;
      return secret;
    });
    w.register('ok', async () => {
      await gate;
      return 'fine';
    });
  });
  const retried = await queue.enqueue({ type: 'nul', maxAttempts: 3 });
  const once = await queue.enqueue({ type: 'nul', maxAttempts: 1 });
  const neighbour = await queue.enqueue({ type: 'ok' });
  const message = "the handler's result cannot be stored: result contains \\u0000 or a lone surrogate, which Postgres jsonb cannot store";
  const waiting = await waitFor(statusOf(retried.uuid, 'retry_wait'));
  expect(waiting).toMatchObject({ attempt: 1, lastError: message, leasedBy: null });
  expect(waiting.runAt.getTime() - waiting.updatedAt.getTime()).toBeGreaterThan(30_000);
  expect(await waitFor(statusOf(once.uuid, 'dead_letter'))).toMatchObject({ attempt: 1, lastError: message });
  expect(waiting.lastError).not.toContain('ret-value');
  expect(await waitFor(statusOf(neighbour.uuid, 'succeeded'))).toMatchObject({ result: 'fine' });
});

it('a handler throwing an Error whose message holds NUL or a lone surrogate: the error is recorded, those replaced by U+FFFD', async () => {
  startWorker({}, (w) => {
    w.register('nul-error', async () => {
      throw new Error('bad\u0000byte');
    });
    w.register('surrogate-error', async () => {
      throw new Error('half \ud800 pair');
    });
  });
  const a = await queue.enqueue({ type: 'nul-error', maxAttempts: 2 });
  const b = await queue.enqueue({ type: 'surrogate-error', maxAttempts: 1 });
  expect(await waitFor(statusOf(a.uuid, 'dead_letter'))).toMatchObject({ attempt: 2, lastError: 'bad\ufffdbyte' });
  expect(await waitFor(statusOf(b.uuid, 'dead_letter'))).toMatchObject({ attempt: 1, lastError: 'half \ufffd pair' });
});

it('the completer: an outcome the store refuses in a batch is replaced by its fallback; the rest of the batch is written', async () => {
  const jobs = await queue.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ type: 'direct', payload: { i } })));
  const leased = await store.claim({ queues: ['default'], workerId: 'direct', limit: 4, leaseMs: 30_000 });
  expect(leased).toHaveLength(4);
  let deferred = true;
  const logs = memoryLogger();
  const completer = new Completer(store, logs, () => deferred);
  const [bad, ...good] = leased;
  const lease = (j: typeof bad) => ({ id: j!.id, leaseToken: j!.leaseToken });
  const problems: string[] = [];
  const results = Promise.all([
    completer.submit(
      { ...lease(bad), status: 'succeeded', result: new Set([1]) },
      () => true,
      (problem) => {
        problems.push(problem);
        return { ...lease(bad), status: 'dead_letter', error: `refused: ${problem}` };
      },
    ),
    ...good.map((j, i) => completer.submit({ ...lease(j), status: 'succeeded', result: { i } })),
  ]);
  // All four wait, then go in one batch.
  expect(completer.pending).toBe(4);
  deferred = false;
  completer.kick();
  expect(await results).toEqual([true, true, true, true]);
  expect(problems).toEqual(['result contains a Set, which JSON cannot represent (it would be stored as something else)']);
  const stored = await Promise.all(leased.map((j) => store.get(j.uuid)));
  expect(stored[0]).toMatchObject({ status: 'dead_letter', lastError: `refused: ${problems[0]}` });
  good.forEach((_, i) => expect(stored[i + 1]).toMatchObject({ status: 'succeeded', result: { i } }));
  expect(jobs.map((j) => j.uuid).sort()).toEqual(leased.map((j) => j.uuid).sort());
  expect(logs.lines.filter((l) => l.level === 'error')).toEqual([]);
});

it('the completer: a submitter whose callback throws is logged; the rest of its batch is still told', async () => {
  await queue.enqueueMany(Array.from({ length: 2 }, (_, i) => ({ type: 'callback', payload: { i } })));
  const leased = await store.claim({ queues: ['default'], workerId: 'callback', limit: 2, leaseMs: 30_000 });
  expect(leased).toHaveLength(2);
  let deferred = true;
  const logs = memoryLogger();
  const completer = new Completer(store, logs, () => deferred);
  const told: Array<[number, boolean]> = [];
  for (const j of leased) {
    completer.submitWith(
      { id: j.id, leaseToken: j.leaseToken, status: 'succeeded' },
      () => true,
      (written) => {
        told.push([j.id, written]);
        if (j === leased[0]) throw new Error('callback broke');
      },
    );
  }
  deferred = false;
  completer.kick();
  await waitFor(async () => (told.length === 2 ? told : undefined));
  expect(told).toEqual(leased.map((j) => [j.id, true]));
  expect(logs.lines.filter((l) => l.level === 'error')).toEqual([
    {
      level: 'error',
      msg: 'job outcome callback failed',
      fields: { job_id: leased[0]!.id, err: { name: 'Error', message: 'callback broke' } },
    },
  ]);
  // Both outcomes were written, and the completer goes on writing.
  expect((await Promise.all(leased.map((j) => store.get(j.uuid)))).map((j) => j?.status)).toEqual(['succeeded', 'succeeded']);
  const [more] = await queue.enqueueMany([{ type: 'callback', payload: { i: 2 } }]);
  const [again] = await store.claim({ queues: ['default'], workerId: 'callback', limit: 1, leaseMs: 30_000 });
  expect(again?.id).toBe(more?.id);
  expect(await completer.submit({ id: again!.id, leaseToken: again!.leaseToken, status: 'succeeded' })).toBe(true);
});
