// A diamond (A → B, A → C, B + C → D) run by four worker processes, one of them SIGKILLed while
// it runs B: B is reaped after its lease and run again elsewhere, and D still runs exactly once,
// after both B and C, with both results (#41).
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { JobQueue, KNOWN_QUEUES } from '../src/index.js';
import { spawnWorker, waitFor, type WorkerProcess } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let queue: JobQueue;
const children: WorkerProcess[] = [];

beforeAll(async () => {
  schema = await createTestSchema('jwflowproc');
  store = await JobStore.open(schema.dsn, { maxConns: 4 });
  queue = new JobQueue(store, { knownQueues: [...KNOWN_QUEUES] });
});
afterAll(async () => {
  for (const c of children) c.child.kill('SIGKILL');
  await store?.close();
  await schema?.drop();
});

interface Ran {
  type: string;
  start: number;
  end: number;
  parents: Record<string, { status: string; result: unknown }>;
}

const ranIn = (p: WorkerProcess): Ran[] =>
  p
    .output()
    .split('\n')
    .filter((l) => l.startsWith('ran '))
    .map((l) => {
      const [, type, start, end, ...json] = l.split(' ');
      return { type: type!, start: Number(start), end: Number(end), parents: JSON.parse(json.join(' ')) as Ran['parents'] };
    });

it('four worker processes run a diamond; one SIGKILLed mid-flow changes nothing but timing', async () => {
  for (let k = 0; k < 4; k++) {
    children.push(await spawnWorker({ Q_DSN: schema.dsn, Q_WORKER_ID: `flow-${k}`, Q_LEASE_MS: '1500' }, 'flow-worker.ts'));
  }
  const { flowId, jobs } = await queue.flow({
    nodes: [
      { ref: 'a', type: 'a' },
      { ref: 'b', type: 'b', dependsOn: ['a'] },
      { ref: 'c', type: 'c', dependsOn: ['a'] },
      { ref: 'd', type: 'd', dependsOn: ['b', 'c'] },
    ],
  });
  // Kill the process that runs B, while it runs.
  const victim = await waitFor(() => children.find((c) => c.output().includes(`started b ${jobs.b!.uuid}`)), 20_000);
  victim.child.kill('SIGKILL');
  const flow = await queue.waitForFlow(flowId, { timeoutMs: 30_000 });
  expect(Object.values(flow.nodes).map((j) => j.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
  expect(flow.nodes.b!.resumeCount).toBe(1); // reaped once, run again

  const runs = children.flatMap(ranIn);
  const of = (t: string) => runs.filter((r) => r.type === t);
  expect(of('d')).toHaveLength(1);
  expect(of('b')).toHaveLength(1); // the killed run never returned
  const d = of('d')[0]!;
  expect(d.start).toBeGreaterThanOrEqual(Math.max(of('b')[0]!.end, of('c')[0]!.end));
  expect(d.parents).toEqual({
    b: { status: 'succeeded', result: { by: 'b' }, error: null },
    c: { status: 'succeeded', result: { by: 'c' }, error: null },
  });
});
