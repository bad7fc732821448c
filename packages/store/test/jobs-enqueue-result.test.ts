// enqueue returns each new job as stored: the statement sends back only what the database
// decided and the store completes the row from its input, so every field is checked here
// against a read of the stored row.
import { StatementScope } from '@q/schema/internal';
import { useJobStore } from '@q/testing';
import { expect, it } from 'vitest';
import { JobStore, type Job, type NewJob } from '../src/index.js';
import { enqueueKeylessJobs } from '../src/jobs/sql/enqueue-jobs.js';
import { toEnqueueBatch } from '../src/jobs/validate.js';

let store: JobStore;

useJobStore(
  JobStore,
  { prefix: 'jobenqres', maxConns: 4, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] },
  (t) => ({ store } = t),
);

it('every field of an enqueued job equals the stored row, with every option set or left out', async () => {
  const [parent] = await store.enqueue([{ queue: 'default', type: 'parent' }]);
  const jobs: NewJob[] = [
    { queue: 'default', type: 'plain' },
    { queue: 'other', type: ' ', payload: null },
    {
      queue: 'mail',
      type: 'send',
      payload: { zeta: 1, a: [1, { y: 'x', b: null }], nested: { deep: true }, n: 1.5 },
      priority: -7,
      runAt: new Date(Date.now() + 3_600_000),
      maxAttempts: 9,
      idempotencyKey: 'enq-result-key',
      lockKey: 'enq-result-lock',
      teamId: 42,
      resourceId: 9_007_199_254_740_991,
      retryOfId: parent!.id,
    },
    { queue: 'default', type: 'past', runAt: new Date(Date.now() - 60_000), priority: 3, payload: 'a string' },
  ];
  const returned = await store.enqueue(jobs);
  expect(returned).toHaveLength(jobs.length);
  for (const job of returned) expect(job).toStrictEqual(await store.get(job.uuid));
  expect(returned.map((j) => j.status)).toEqual(['queued', 'queued', 'scheduled', 'queued']);
  expect(returned[1]!.payload).toEqual({});
});

it('a batch without idempotency keys (one row back, each job built from its input) returns every job as stored', async () => {
  const [parent] = await store.enqueue([{ queue: 'default', type: 'parent' }]);
  const deep: Record<string, unknown> = { leaf: 'x' };
  let cur = deep;
  for (let i = 0; i < 40; i++) cur = { next: cur, i };
  const holes: unknown[] = [undefined, 1];
  holes[3] = 3;
  const bare = Object.assign(Object.create(null) as Record<string, unknown>, { b: 2, a: 1 });
  class Point {
    constructor(
      readonly x: number,
      readonly y: number,
    ) {}
  }
  const jobs: NewJob[] = [
    { queue: 'default', type: 'plain' },
    { queue: 'other', type: ' ', payload: null },
    {
      queue: 'mail',
      type: 'send',
      payload: { zeta: 1, a: [1, { y: 'x', b: null }], nested: { deep: true }, n: 1.5, big: 1e300, tiny: 5e-324, neg: -0 },
      priority: -7,
      runAt: new Date(Date.now() + 3_600_000),
      maxAttempts: 9,
      lockKey: 'enq-keyless-lock',
      teamId: 42,
      resourceId: 9_007_199_254_740_991,
      retryOfId: parent!.id,
    },
    { queue: 'default', type: 'past', runAt: new Date(Date.now() - 60_000), priority: 3, payload: 'a string' },
    // What JSON changes on the way (toJSON, undefined, holes, non-plain objects) and deep nesting.
    { queue: 'default', type: 'json', payload: { at: new Date(0), gone: undefined, list: holes, point: new Point(1, 2) } },
    { queue: 'default', type: 'deep', payload: cur },
    { queue: 'default', type: 'bare', payload: bare },
    { queue: 'default', type: 'unicode', payload: { s: 'é\u00e9 \ud83d\ude00 😀', ключ: [true, false] } },
  ];
  const returned = await store.enqueue(jobs);
  expect(returned).toHaveLength(jobs.length);
  for (const job of returned) expect(job).toStrictEqual(await store.get(job.uuid));
  expect(returned.map((j) => j.status)).toEqual(['queued', 'queued', 'scheduled', 'queued', 'queued', 'queued', 'queued', 'queued']);
  expect(returned[4]!.payload).toEqual({ at: '1970-01-01T00:00:00.000Z', list: [null, 1, null, 3], point: { x: 1, y: 2 } });
  expect(returned.slice(1).every((j, i) => j.id > returned[i]!.id)).toBe(true);
  // A value JSON would store as something else is refused wherever it sits, fast path or not.
  for (const payload of [{ a: { b: [{ c: new Map([[1, 2]]) }] } }, { a: [1, 2, new Set()] }, { n: Number.NaN }, { f: { g: () => 1 } }]) {
    await expect(
      store.enqueue([
        { queue: 'default', type: 'ok' },
        { queue: 'default', type: 'bad', payload },
      ]),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  }
});

it('a key repeated in the batch and a key stored before both return the one stored job, whole', async () => {
  const [original] = await store.enqueue([{ queue: 'default', type: 'first', idempotencyKey: 'k-before', payload: { v: 1 }, priority: 5 }]);
  const returned = await store.enqueue([
    { queue: 'default', type: 'dup-in-batch', idempotencyKey: 'k-batch', payload: { v: 2 }, lockKey: 'l1' },
    { queue: 'default', type: 'dup-in-batch', idempotencyKey: 'k-batch', payload: { v: 3 } },
    { queue: 'default', type: 'first', idempotencyKey: 'k-before', payload: { v: 4 } },
  ]);
  expect(returned[1]).toStrictEqual(returned[0]);
  expect(returned[0]).toStrictEqual(await store.get(returned[0]!.uuid));
  expect(returned[0]).toMatchObject({ queue: 'default', type: 'dup-in-batch', payload: { v: 2 }, lockKey: 'l1' });
  expect(returned[2]).toStrictEqual(await store.get(original!.uuid));
  expect(returned[2]).toMatchObject({ queue: 'default', type: 'first', priority: 5 });
});

it('a job enqueued alone (its own statement) returns as stored too, and its key returns the original after', async () => {
  const [parent] = await store.enqueue([{ queue: 'default', type: 'parent' }]);
  expect(parent).toStrictEqual(await store.get(parent!.uuid));
  const alone: NewJob = {
    queue: 'mail',
    type: 'send',
    payload: { b: [1, 2], a: { c: 'x' } },
    priority: 4,
    runAt: new Date(Date.now() + 60_000),
    maxAttempts: 2,
    idempotencyKey: 'alone-key',
    lockKey: 'alone-lock',
    teamId: 7,
    resourceId: 8,
    retryOfId: parent!.id,
  };
  const [first] = await store.enqueue([alone]);
  expect(first).toStrictEqual(await store.get(first!.uuid));
  expect(first).toMatchObject({ status: 'scheduled', priority: 4, maxAttempts: 2, teamId: 7, resourceId: 8, retryOfId: parent!.id });
  const [again] = await store.enqueue([{ ...alone, payload: { other: true }, priority: 9 }]);
  expect(again).toStrictEqual(first);
  // A retryOfId naming no job is refused as it is in a batch, and nothing is written.
  await expect(store.enqueue([{ queue: 'default', type: 'orphan', retryOfId: 987_654_321 }])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  expect((await store.list({ type: 'orphan' })).jobs).toHaveLength(0);
});

it('a job without a key enqueued alone (two columns back, the job built from its input) returns as stored, with every option set or left out', async () => {
  const [parent] = await store.enqueue([{ queue: 'default', type: 'parent' }]);
  const alone: NewJob[] = [
    { queue: 'default', type: 'plain' },
    { queue: 'other', type: ' ', payload: null },
    {
      queue: 'mail',
      type: 'send',
      payload: { zeta: 1, a: [1, { y: 'x', b: null }], n: 1.5 },
      priority: -7,
      runAt: new Date(Date.now() + 3_600_000),
      maxAttempts: 9,
      lockKey: 'alone-keyless-lock',
      teamId: 42,
      resourceId: 9_007_199_254_740_991,
      retryOfId: parent!.id,
    },
    { queue: 'default', type: 'past', runAt: new Date(Date.now() - 60_000), priority: 3, payload: 'a string' },
  ];
  const returned = [];
  for (const job of alone) returned.push(...(await store.enqueue([job])));
  expect(returned).toHaveLength(alone.length);
  for (const job of returned) expect(job).toStrictEqual(await store.get(job.uuid));
  expect(returned.map((j) => j.status)).toEqual(['queued', 'queued', 'scheduled', 'queued']);
  expect(returned[1]!.payload).toEqual({});
  expect(returned[3]!.runAt.getTime()).toBe(returned[3]!.createdAt.getTime());
});

/** The stored id, uuid and payload of each of `jobs`, read in one query. */
async function storedRows(jobs: readonly Job[]): Promise<Map<number, { uuid: string; payload: unknown }>> {
  const { rows } = await store.pool.query<{ id: string; uuid: string; payload: unknown }>(
    'SELECT id, uuid, payload FROM q_jobs WHERE id = ANY($1::int8[])',
    [jobs.map((j) => j.id)],
  );
  return new Map(rows.map((r) => [Number(r.id), { uuid: r.uuid, payload: r.payload }]));
}

it('keyless batches enqueued side by side, their ids drawn at once, each return their own jobs', async () => {
  // Two statements drawing from the sequence at the same moment interleave their ids: a batch
  // then reports them one by one instead of as a run from its first id. Either way every
  // returned job must be the row holding its payload.
  for (let round = 0; round < 5; round++) {
    const batches = await Promise.all(
      Array.from({ length: 4 }, (_, b) =>
        store.enqueue(Array.from({ length: 500 }, (_, i) => ({ queue: 'side', type: 'noop', payload: { round, b, i } }))),
      ),
    );
    const all = batches.flat();
    const stored = await storedRows(all);
    expect(stored.size).toBe(2_000);
    batches.forEach((jobs, b) =>
      jobs.forEach((job, i) => {
        expect(job.payload).toEqual({ round, b, i });
        expect(stored.get(job.id), `job ${b}/${i}`).toEqual({ uuid: job.uuid, payload: { round, b, i } });
      }),
    );
  }
});

it('a keyless batch whose ids are not one run in input order reports each id', async () => {
  // The ids a split batch brings are drawn beforehand; here they are given out of order, with
  // gaps, so the statement's one-run shortcut (first id + position) cannot hold.
  const scope = new StatementScope(store.schema);
  const base = 1_000_000_000;
  for (const given of [
    [base + 5, base + 1, base + 9],
    [base + 23, base + 22, base + 21],
    [base + 30, base + 31, base + 32],
  ]) {
    const batch = toEnqueueBatch(given.map((id) => ({ queue: 'given', type: 'noop', payload: { id } })));
    const r = await enqueueKeylessJobs(scope, store.pool, { ...batch, ids: given }, 'q_test_unused_channel');
    expect(r.ids).toEqual(given);
    expect(r.inserted).toBe(3);
    const { rows } = await store.pool.query<{ id: string; payload: { id: number } }>(
      'SELECT id, payload FROM q_jobs WHERE id = ANY($1::int8[])',
      [given],
    );
    expect(rows.map((row) => [Number(row.id), row.payload.id]).sort()).toEqual(given.map((id) => [id, id]).sort());
  }
});
