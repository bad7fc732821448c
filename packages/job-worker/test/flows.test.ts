// Flows (#41) run by workers: a diamond run by several workers on their own stores runs its
// join exactly once, after both branches, and the join reads both results through ctx.parents;
// a parent's failure passed on by `continue` is what the child reads.
import { QErrorCode, isQError } from '@q/schema';
import { JobStore } from '@q/store';
import { waitFor, type TestSchema } from '@q/testing';
import { expect, it } from 'vitest';
import { DeadLetterError, JobQueue, Worker, type FlowParent, type JobQueue as Queue } from '../src/index.js';
import { useWorkerTests } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let queue: Queue;
useWorkerTests('jwflows', { concurrency: 4 }, (t) => ({ schema, store, queue } = t));

interface Run {
  ref: string;
  worker: number;
  start: number;
  end: number;
  parents: Record<string, FlowParent>;
}

/** Runs `body` with `n` workers, each on a store of its own, all serving `handlers`; stops and closes them after. */
async function withWorkers(n: number, setup: (w: Worker, k: number) => void, body: () => Promise<void>): Promise<void> {
  const stores = await Promise.all(Array.from({ length: n }, () => JobStore.open(schema.dsn, { maxConns: 3, migrate: false })));
  const ac = new AbortController();
  const workers = stores.map((s, k) => {
    const w = new Worker(s, { queues: ['default', 'task'], concurrency: 2, pollIntervalMs: 50, maintenanceIntervalMs: 200, retryBaseMs: 1 });
    setup(w, k);
    return { w, run: w.run(ac.signal) };
  });
  try {
    await body();
  } finally {
    ac.abort();
    await Promise.all(workers.map(async ({ w, run }) => (await run, await w.wait(5_000))));
    await Promise.all(stores.map((s) => s.close()));
  }
}

it('runs a diamond with four workers: the join runs once, after both branches, and reads both results', async () => {
  for (let round = 0; round < 3; round++) {
    const runs: Run[] = [];
    const handler = (k: number) => async (job: { type: string; payload: unknown }, ctx: { parents: Promise<Record<string, FlowParent>> }) => {
      const start = performance.now();
      const parents = await ctx.parents;
      await new Promise((r) => setTimeout(r, 20));
      runs.push({ ref: job.type, worker: k, start, end: performance.now(), parents });
      return { by: job.type, n: (job.payload as { n: number }).n };
    };
    await withWorkers(
      4,
      (w, k) => {
        for (const t of ['a', 'b', 'c', 'd']) w.register(t, handler(k));
      },
      async () => {
        const { flowId, jobs } = await queue.flow({
          name: `diamond ${round}`,
          nodes: [
            { ref: 'a', type: 'a', payload: { n: 1 } },
            { ref: 'b', type: 'b', payload: { n: 2 }, dependsOn: ['a'], queue: 'task' },
            { ref: 'c', type: 'c', payload: { n: 3 }, dependsOn: ['a'] },
            { ref: 'd', type: 'd', payload: { n: 4 }, dependsOn: ['b', 'c'], queue: 'task' },
          ],
        });
        expect(flowId).toBeTruthy();
        const done = await waitFor(async () => (await store.get(jobs.d!.uuid))?.status === 'succeeded', 15_000);
        expect(done).toBe(true);
      },
    );
    const byRef = (r: string) => runs.filter((x) => x.ref === r);
    for (const r of ['a', 'b', 'c', 'd']) expect(byRef(r), r).toHaveLength(1);
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((r) => byRef(r)[0]!);
    expect(b!.start).toBeGreaterThanOrEqual(a!.end);
    expect(c!.start).toBeGreaterThanOrEqual(a!.end);
    expect(d!.start).toBeGreaterThanOrEqual(Math.max(b!.end, c!.end));
    expect(a!.parents).toEqual({});
    expect(b!.parents).toEqual({ a: { status: 'succeeded', result: { by: 'a', n: 1 }, error: null } });
    expect(d!.parents).toEqual({
      b: { status: 'succeeded', result: { by: 'b', n: 2 }, error: null },
      c: { status: 'succeeded', result: { by: 'c', n: 3 }, error: null },
    });
  }
});

it("gives a child a parent's failure through `continue`, and dead-letters the child of `fail` with a reason naming the parent", async () => {
  const seen: Record<string, FlowParent>[] = [];
  await withWorkers(
    2,
    (w) => {
      w.register('explode', async () => {
        throw new DeadLetterError('the disk is full');
      });
      w.register('after', async (_job, ctx) => {
        seen.push(await ctx.parents);
        return 'cleaned up';
      });
    },
    async () => {
      const { jobs } = await queue.flow({
        nodes: [
          { ref: 'work', type: 'explode' },
          { ref: 'cleanup', type: 'after', dependsOn: [{ ref: 'work', onFailure: 'continue' }] },
          { ref: 'report', type: 'after', dependsOn: ['work'] },
        ],
      });
      await waitFor(async () => (await store.get(jobs.cleanup!.uuid))?.status === 'succeeded', 15_000);
      expect(await store.get(jobs.report!.uuid)).toMatchObject({ status: 'dead_letter', lastError: 'flow: parent work ended dead_letter' });
    },
  );
  expect(seen).toEqual([{ work: { status: 'dead_letter', result: null, error: 'the disk is full' } }]);
});

it('refuses a node on a queue no worker consumes, writing nothing', async () => {
  const closed = new JobQueue(store, { knownQueues: ['default'] });
  const flows = async () => (await schema.pool().query<{ n: number }>('SELECT count(*)::int AS n FROM q_flows')).rows[0]!.n;
  const before = await flows();
  const err = await closed
    .flow({
      nodes: [
        { ref: 'a', type: 'a' },
        { ref: 'b', type: 'b', queue: 'elsewhere', dependsOn: ['a'] },
      ],
    })
    .catch((e: unknown) => e);
  expect(isQError(err) && err.code === QErrorCode.UNKNOWN_QUEUE, String(err)).toBe(true);
  expect(await flows()).toBe(before);
});

it('cancelFlow while a node runs: its handler sees the signal aborted, waiting nodes never start; waitForFlow resolves at the end', async () => {
  const started: string[] = [];
  let aborted = false;
  await withWorkers(
    2,
    (w) => {
      w.register('long', async (_job, ctx) => {
        started.push('long');
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, 30_000);
          ctx.signal.addEventListener('abort', () => {
            aborted = true;
            clearTimeout(t);
            resolve();
          });
        });
        return 'stopped';
      });
      w.register('next', async () => {
        started.push('next');
      });
    },
    async () => {
      const { flowId, jobs } = await queue.flow({
        nodes: [
          { ref: 'long', type: 'long' },
          { ref: 'next', type: 'next', dependsOn: [{ ref: 'long', onFailure: 'continue' }] },
          { ref: 'last', type: 'next', dependsOn: ['next'] },
        ],
      });
      await waitFor(async () => (await store.get(jobs.long!.uuid))?.status === 'running', 10_000);
      const waiting = queue.waitForFlow(flowId, { timeoutMs: 15_000 });
      expect(await queue.cancelFlow(flowId)).toEqual({ cancelled: 2, cancelRequested: 1 });
      const flow = await waiting;
      expect(Object.fromEntries(Object.entries(flow.nodes).map(([r, j]) => [r, j.status]))).toEqual({
        long: 'cancelled',
        next: 'cancelled',
        last: 'cancelled',
      });
      expect(flow.finishedAt).toBeInstanceOf(Date);
      expect(await queue.cancelFlow(flowId)).toEqual({ cancelled: 0, cancelRequested: 0 });
    },
  );
  expect(aborted).toBe(true);
  expect(started).toEqual(['long']);
});

it('waitForFlow rejects for an unknown flow, and on timeout', async () => {
  const unknown = await queue.waitForFlow('00000000-0000-4000-8000-000000000000').catch((e: unknown) => e);
  expect(isQError(unknown) && unknown.code === QErrorCode.NOT_FOUND, String(unknown)).toBe(true);
  const { flowId } = await queue.flow({ nodes: [{ ref: 'a', type: 'nobody-runs-this', queue: 'backup' }] });
  const late = await queue.waitForFlow(flowId, { timeoutMs: 200 }).catch((e: unknown) => e);
  expect(isQError(late) && late.code === QErrorCode.TIMEOUT, String(late)).toBe(true);
});

it('fans out at run time: a handler adds one node per page and a summary that reads every page', async () => {
  const sums: Record<string, FlowParent>[] = [];
  await withWorkers(
    2,
    (w) => {
      w.register('split', async (job, ctx) => {
        const pages = (job.payload as { pages: number }).pages;
        const refs = Array.from({ length: pages }, (_, i) => `page${i}`);
        await ctx.flow.add([
          ...refs.map((ref, i) => ({ ref, type: 'page', payload: { i } })),
          { ref: 'summary', type: 'summary', dependsOn: refs, queue: 'task' },
        ]);
        return { pages };
      });
      w.register('page', async (job) => ({ words: 10 * ((job.payload as { i: number }).i + 1) }));
      w.register('summary', async (_job, ctx) => {
        const parents = await ctx.parents;
        sums.push(parents);
        return Object.values(parents).reduce((n, p) => n + (p.result as { words: number }).words, 0);
      });
    },
    async () => {
      const { flowId } = await queue.flow({ nodes: [{ ref: 'split', type: 'split', payload: { pages: 5 } }] });
      const flow = await queue.waitForFlow(flowId, { timeoutMs: 15_000 });
      expect(Object.keys(flow.nodes).sort()).toEqual(['page0', 'page1', 'page2', 'page3', 'page4', 'split', 'summary']);
      expect(flow.nodes.summary).toMatchObject({ status: 'succeeded', result: 150 });
    },
  );
  expect(sums).toHaveLength(1);
  expect(Object.keys(sums[0]!).sort()).toEqual(['page0', 'page1', 'page2', 'page3', 'page4']);
});
