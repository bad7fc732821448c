// Inference steps of flows (#41) end to end: a flow node that is a request on the request queue,
// answered by runPartitionWorker (a stand-in model, test/fixtures/model.ts), finishes in the ack
// that writes its result; the child, run by a job worker, reads the model's body in ctx.parents.
// An error result and a missed deadline each apply the edge policies; a partition owner SIGKILLed
// while the request is in flight still ends with one result and one release. A step with parents
// is sent when they are done; one added by a running job (ctx.flow.add) is sent by the add.
import { runPartitionWorker, type PartitionWorkerStats } from '@q/partition-consumer';
import { RequestStore } from '@q/store';
import { waitFor, type TestSchema } from '@q/testing';
import { afterEach, beforeAll, afterAll, expect, it } from 'vitest';
import { FLOW_REQUEST_TYPE, type FlowParent, type JobQueue } from '../src/index.js';
import { spawnWorker, useWorkerTests, type WorkerProcess } from './helpers.js';
import { modelHandler } from './fixtures/model.js';

let schema: TestSchema;
let queue: JobQueue;
let requests: RequestStore;
const children: WorkerProcess[] = [];
const models: Array<{ ac: AbortController; run: Promise<PartitionWorkerStats> }> = [];
const { startWorker } = useWorkerTests(
  'jwinfer',
  { concurrency: 2, pollIntervalMs: 50, maintenanceIntervalMs: 100 },
  (t) => ({ schema, queue } = t),
);

// The job store was installed first (useWorkerTests); opening the request queue now adds the
// result trigger (requests migration 0005).
beforeAll(async () => {
  requests = await RequestStore.open(schema.dsn, { maxConns: 4 });
});
afterEach(async () => {
  for (const m of models.splice(0)) m.ac.abort();
  for (const c of children.splice(0)) c.child.kill('SIGKILL');
});
afterAll(async () => {
  await requests?.close();
});

const nowSec = (): number => Math.floor(Date.now() / 1000);

/** Serves `llmQueue` with the stand-in model in this process until the test ends. */
function serveModel(llmQueue: string, owner: string): void {
  const ac = new AbortController();
  const run = runPartitionWorker({
    store: requests,
    queue: llmQueue,
    owner,
    concurrency: 4,
    batchSize: 4,
    leaseTtlMs: 1_000,
    drainTimeoutMs: 500,
    pollIntervalMs: 50,
    signal: ac.signal,
    handle: modelHandler(owner),
  });
  models.push({ ac, run });
}

/** A job worker whose `use` handler records the parents it reads, by node job uuid. */
function serveChildren(): Map<string, Record<string, FlowParent>> {
  const seen = new Map<string, Record<string, FlowParent>>();
  startWorker({}, (w) =>
    w.register('use', async (job, ctx) => {
      const parents = await ctx.parents;
      seen.set(job.uuid, parents);
      return { used: Object.keys(parents) };
    }),
  );
  return seen;
}

it('runPartitionWorker answers the request; the child runs with the model body', async () => {
  serveModel('llm-ok', 'model-a');
  const seen = serveChildren();
  const { flowId, jobs } = await queue.flow({
    nodes: [
      { ref: 'ask', request: { queue: 'llm-ok', payload: { say: 'hello' }, deadline: nowSec() + 60, tenant: 'acme' } },
      { ref: 'use', type: 'use', dependsOn: ['ask'] },
    ],
  });
  expect(jobs.ask).toMatchObject({ type: FLOW_REQUEST_TYPE, status: 'waiting' });
  const flow = await queue.waitForFlow(flowId, { timeoutMs: 20_000 });
  expect(flow.nodes.ask).toMatchObject({ status: 'succeeded', result: { answer: 'you said hello', by: 'model-a' } });
  expect(flow.nodes.use!.status).toBe('succeeded');
  expect(seen.get(jobs.use!.uuid)).toEqual({ ask: { status: 'succeeded', result: { answer: 'you said hello', by: 'model-a' }, error: null } });
});

it('an error result fails the node, and the edge policies apply', async () => {
  serveModel('llm-err', 'model-b');
  const seen = serveChildren();
  const { flowId, jobs } = await queue.flow({
    nodes: [
      { ref: 'ask', request: { queue: 'llm-err', payload: { fail: true }, deadline: nowSec() + 60 } },
      { ref: 'strict', type: 'use', dependsOn: ['ask'] },
      { ref: 'lenient', type: 'use', dependsOn: [{ ref: 'ask', onFailure: 'continue' }] },
    ],
  });
  const flow = await queue.waitForFlow(flowId, { timeoutMs: 20_000 });
  expect(flow.nodes.ask).toMatchObject({ status: 'dead_letter', lastError: 'request: INFERENCE_ERROR (model failed)' });
  expect(flow.nodes.strict!.status).toBe('dead_letter');
  expect(flow.nodes.lenient!.status).toBe('succeeded');
  expect(seen.has(jobs.strict!.uuid)).toBe(false);
  expect(seen.get(jobs.lenient!.uuid)).toEqual({
    ask: { status: 'dead_letter', result: null, error: 'request: INFERENCE_ERROR (model failed)' },
  });
});

it('a missed deadline fails the node in a maintenance round, and the edge policies apply', async () => {
  const seen = serveChildren(); // its maintenance fails the step; nothing serves llm-none
  const { flowId, jobs } = await queue.flow({
    nodes: [
      { ref: 'ask', request: { queue: 'llm-none', payload: { say: 'late' }, deadline: nowSec() + 1 } },
      { ref: 'strict', type: 'use', dependsOn: ['ask'] },
      { ref: 'lenient', type: 'use', dependsOn: [{ ref: 'ask', onFailure: 'continue' }] },
    ],
  });
  const flow = await queue.waitForFlow(flowId, { timeoutMs: 20_000 });
  expect(flow.nodes.ask).toMatchObject({ status: 'dead_letter', lastError: 'request: the deadline passed with no result' });
  expect(flow.nodes.strict!.status).toBe('dead_letter');
  expect(seen.get(jobs.lenient!.uuid)?.ask?.status).toBe('dead_letter');
  // The request was withdrawn: nothing is left for a dispatcher to run.
  expect(await requests.hasRequests('llm-none')).toBe(false);
});

it('a partition owner SIGKILLed with the request in flight: one result, one release', async () => {
  const victim = await spawnWorker(
    { Q_DSN: schema.dsn, Q_QUEUE: 'llm-kill', Q_OWNER: 'victim', Q_LEASE_MS: '1000', Q_HOLD_MS: '600000' },
    'model-process.ts',
  );
  children.push(victim);
  const seen = serveChildren();
  const { flowId, jobs } = await queue.flow({
    nodes: [
      { ref: 'ask', request: { queue: 'llm-kill', payload: { say: 'again' }, deadline: nowSec() + 120 } },
      { ref: 'use', type: 'use', dependsOn: ['ask'] },
    ],
  });
  const requestId = (jobs.ask!.payload as { request: { id: string } }).request.id;
  await waitFor(() => victim.output().includes(`started ${requestId}`), 20_000);
  victim.child.kill('SIGKILL');
  await victim.exited;
  serveModel('llm-kill', 'heir'); // takes the dead owner's partitions once its lease lapses, and redelivers
  const flow = await queue.waitForFlow(flowId, { timeoutMs: 30_000 });
  expect(flow.nodes.ask).toMatchObject({ status: 'succeeded', result: { answer: 'you said again', by: 'heir' } });
  expect(flow.nodes.use!.status).toBe('succeeded');
  expect(seen.get(jobs.use!.uuid)?.ask?.result).toEqual({ answer: 'you said again', by: 'heir' });
  const sql = schema.pool();
  const { rows } = await sql.query<{ node: number; child: number; results: number; requests: number; links: number }>(
    `SELECT (SELECT count(*)::int FROM q_jobs_all WHERE flow_id = $1 AND flow_ref = 'ask') AS node,
            (SELECT count(*)::int FROM q_jobs_all WHERE flow_id = $1 AND flow_ref = 'use') AS child,
            (SELECT count(*)::int FROM q_results WHERE route = 'q:flow:' || $1) AS results,
            (SELECT count(*)::int FROM q_requests WHERE queue = 'llm-kill') AS requests,
            (SELECT count(*)::int FROM q_flow_requests) AS links`,
    [flowId],
  );
  expect(rows[0]).toEqual({ node: 1, child: 1, results: 0, requests: 0, links: 0 });
  // One release: the child ran once (one attempt), after the one result, the heir's only ack.
  expect(flow.nodes.use!.attempt).toBe(1);
  const heir = models.splice(0);
  for (const m of heir) m.ac.abort();
  const [stats] = await Promise.all(heir.map((m) => m.run));
  expect(stats).toMatchObject({ acked: 1, fenced: 0 });
});

it('an inference step with parents is sent when they are done, its deadline counted from the send', async () => {
  serveModel('llm-after', 'model-c');
  const seen = new Map<string, Record<string, FlowParent>>();
  startWorker({}, (w) => {
    w.register('prep', async () => ({ prepared: true }));
    w.register('use', async (job, ctx) => {
      const parents = await ctx.parents;
      seen.set(job.uuid, parents);
      return { used: Object.keys(parents) };
    });
  });
  const { flowId, jobs } = await queue.flow({
    nodes: [
      { ref: 'prep', type: 'prep' },
      { ref: 'ask', request: { queue: 'llm-after', payload: { say: 'later' }, deadlineSeconds: 30 }, dependsOn: ['prep'] },
      { ref: 'use', type: 'use', dependsOn: ['ask'] },
    ],
  });
  expect(jobs.ask).toMatchObject({ type: FLOW_REQUEST_TYPE, status: 'waiting', payload: { request: { queue: 'llm-after' } } });
  const flow = await queue.waitForFlow(flowId, { timeoutMs: 20_000 });
  expect(flow.nodes.prep!.status).toBe('succeeded');
  expect(flow.nodes.ask).toMatchObject({ status: 'succeeded', result: { answer: 'you said later', by: 'model-c' } });
  // Sent at the release: its deadline is 30 s after prep finished, not after the insert.
  const sent = flow.nodes.ask!.payload as { request: { id: string; deadline: number } };
  expect(typeof sent.request.id).toBe('string');
  expect(sent.request.deadline).toBeGreaterThanOrEqual(Math.floor(flow.nodes.prep!.finishedAt!.getTime() / 1000) + 29);
  expect(seen.get(jobs.use!.uuid)).toEqual({ ask: { status: 'succeeded', result: { answer: 'you said later', by: 'model-c' }, error: null } });
});

it('ctx.flow.add: a running job computes a prompt, adds an inference step and a child of it', async () => {
  serveModel('llm-dyn', 'model-d');
  const seen = new Map<string, Record<string, FlowParent>>();
  startWorker({}, (w) => {
    w.register('plan', async (job, ctx) => {
      const topic = (job.payload as { topic: string }).topic;
      const added = await ctx.flow.add([
        { ref: 'ask', request: { queue: 'llm-dyn', payload: { say: `about ${topic}` }, deadlineSeconds: 30 } },
        { ref: 'use', type: 'use', dependsOn: ['ask', 'plan'] },
      ]);
      return { added: Object.keys(added).sort() };
    });
    w.register('use', async (job, ctx) => {
      const parents = await ctx.parents;
      seen.set(job.uuid, parents);
      return { used: Object.keys(parents).sort() };
    });
  });
  const { flowId } = await queue.flow({ nodes: [{ ref: 'plan', type: 'plan', payload: { topic: 'owls' } }] });
  await waitFor(async () => Object.keys((await queue.getFlow(flowId))?.nodes ?? {}).length === 3, 20_000);
  const flow = await queue.waitForFlow(flowId, { timeoutMs: 20_000 });
  expect(flow.nodes.plan).toMatchObject({ status: 'succeeded', result: { added: ['ask', 'use'] } });
  expect(flow.nodes.ask).toMatchObject({
    type: FLOW_REQUEST_TYPE,
    status: 'succeeded',
    result: { answer: 'you said about owls', by: 'model-d' },
  });
  expect(flow.nodes.use!.status).toBe('succeeded');
  expect(seen.get(flow.nodes.use!.uuid)?.ask).toEqual({
    status: 'succeeded',
    result: { answer: 'you said about owls', by: 'model-d' },
    error: null,
  });
});
