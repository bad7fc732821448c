// Telemetry of flows, with the SDK's in-memory exporters: a flow is one trace (every node's
// q.jobs.process span a child of the flow's q.flows.create span, linked to its parents' spans)
// sampled once, by its root; flows started are counted, and a released node's wait from its
// release to its claim is recorded.
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import {
  AlwaysOffSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { METRIC, jobMetrics } from '@q/otel';
import { JobStore } from '@q/store';
import { createTestSchema, runWorkerUntil, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { JobQueue, Worker } from '../src/index.js';

let schema: TestSchema;
let store: JobStore;
const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
const meterProvider = new MeterProvider({ readers: [reader] });

beforeAll(async () => {
  schema = await createTestSchema('jw_flowtel');
  store = await JobStore.open(schema.dsn, { maxConns: 4 });
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
});

const points = async (name: string) => {
  await reader.forceFlush();
  const all = metricExporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
  return all.find((m) => m.descriptor.name === name)?.dataPoints ?? [];
};

it('a flow is one trace whose node spans link to their parents, counted once when started; each released node records its wait from release to claim', async () => {
  const queue = new JobQueue(store, { knownQueues: ['ft'], meterProvider, tracerProvider });
  const input = {
    idempotencyKey: 'tel-1',
    nodes: [
      { ref: 'a', type: 'root', queue: 'ft' },
      { ref: 'b', type: 'mid', queue: 'ft', dependsOn: ['a'] },
      { ref: 'c', type: 'mid', queue: 'ft', dependsOn: ['a'] },
      { ref: 'd', type: 'join', queue: 'ft', dependsOn: ['b', 'c'] },
    ],
  };
  const { flowId, created } = await queue.flow(input);
  expect(created).toBe(true);
  // Found again by its key: not a second start.
  expect((await queue.flow(input)).created).toBe(false);
  expect(await points(METRIC.flowsStarted)).toEqual([expect.objectContaining({ value: 1 })]);

  await store.enqueue([{ queue: 'ft', type: 'plain' }]);
  const worker = new Worker(store, {
    queues: ['ft'],
    concurrency: 2,
    tracer: tracerProvider.getTracer('test'),
    metrics: jobMetrics(meterProvider, { deprecatedNames: false }),
    pollIntervalMs: 50,
  });
  for (const type of ['root', 'mid', 'join', 'plain']) worker.register(type, async () => type);
  await runWorkerUntil(
    worker,
    async () => {
      const { rows } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'succeeded'`);
      return rows[0]!.n === 5;
    },
    { timeoutMs: 30_000, drainMs: 5_000 },
  );

  const processed = spans.getFinishedSpans().filter((s) => s.name === 'q.jobs.process');
  expect(processed).toHaveLength(5);
  const creates = spans.getFinishedSpans().filter((s) => s.name === 'q.flows.create');
  // The second call found the flow by its key: its span says so, and its nodes are the first's.
  expect(creates.map((s) => s.attributes['q.flow.created'])).toEqual([true, false]);
  const root = creates[0]!;
  expect(root.attributes['q.flow.id']).toBe(flowId);
  const flowTrace = root.spanContext().traceId;
  const nodes = processed.filter((s) => s.attributes['q.flow.id'] === flowId);
  expect(nodes.map((s) => s.attributes['q.flow.ref']).sort()).toEqual(['a', 'b', 'c', 'd']);
  for (const s of nodes) {
    expect(s.spanContext().traceId).toBe(flowTrace);
    expect(s.parentSpanContext).toMatchObject({ traceId: flowTrace, spanId: root.spanContext().spanId, isRemote: true });
  }
  // Each node's span links to its parents' spans (recorded as they ran), and to nothing else.
  const byRef = Object.fromEntries(nodes.map((s) => [s.attributes['q.flow.ref'] as string, s]));
  const linked = (ref: string) => byRef[ref]!.links.map((l) => l.context.spanId).sort();
  const spanOf = (...refs: string[]) => refs.map((r) => byRef[r]!.spanContext().spanId).sort();
  expect(linked('a')).toEqual([]);
  expect(linked('b')).toEqual(spanOf('a'));
  expect(linked('c')).toEqual(spanOf('a'));
  expect(linked('d')).toEqual(spanOf('b', 'c'));
  // A job outside flows keeps a trace of its own.
  const plain = processed.find((s) => s.attributes['job.type'] === 'plain')!;
  expect(plain.spanContext().traceId).not.toBe(flowTrace);
  expect(plain.attributes['q.flow.id']).toBeUndefined();

  // Released nodes only (b, c, d: not the root a, nor the plain job), by type, never negative.
  const waits = await points(METRIC.flowsReleaseLatency);
  const byType = Object.fromEntries(waits.map((p) => [p.attributes['job.type'], p.value as { count: number; min?: number }]));
  expect(Object.keys(byType).sort()).toEqual(['join', 'mid']);
  expect(byType.mid!.count).toBe(2);
  expect(byType.join!.count).toBe(1);
  expect(byType.join!.min).toBeGreaterThanOrEqual(0);
});

it("a flow its root's sampler leaves out is traced nowhere: its nodes run, and record no span and no span row", async () => {
  const offExporter = new InMemorySpanExporter();
  const off = new BasicTracerProvider({
    sampler: new ParentBasedSampler({ root: new AlwaysOffSampler() }),
    spanProcessors: [new SimpleSpanProcessor(offExporter)],
  });
  const queue = new JobQueue(store, { knownQueues: ['fs'], tracerProvider: off });
  const { flowId } = await queue.flow({
    nodes: [
      { ref: 'a', type: 'root', queue: 'fs' },
      { ref: 'b', type: 'mid', queue: 'fs', dependsOn: ['a'] },
    ],
  });
  // The worker's own tracer samples every root: only the flow's decision keeps its nodes out.
  const worker = new Worker(store, { queues: ['fs'], concurrency: 2, tracer: tracerProvider.getTracer('test'), pollIntervalMs: 50 });
  for (const type of ['root', 'mid']) worker.register(type, async () => type);
  const before = spans.getFinishedSpans().length;
  await runWorkerUntil(
    worker,
    async () => {
      const { rows } = await store.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM q_jobs_all WHERE flow_id = $1 AND status = 'succeeded'`,
        [flowId],
      );
      return rows[0]!.n === 2;
    },
    { timeoutMs: 30_000, drainMs: 5_000 },
  );
  expect(
    spans
      .getFinishedSpans()
      .slice(before)
      .filter((s) => s.attributes['q.flow.id'] === flowId),
  ).toEqual([]);
  expect(offExporter.getFinishedSpans()).toEqual([]);
  const { rows } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_flow_spans WHERE flow_id = $1`, [flowId]);
  expect(rows[0]!.n).toBe(0);
  await off.shutdown();
});

it("nodes a running node adds (ctx.flow.add) are in the flow's trace too", async () => {
  const queue = new JobQueue(store, { knownQueues: ['fa'], tracerProvider });
  const { flowId } = await queue.flow({ nodes: [{ ref: 'pages', type: 'split', queue: 'fa' }] });
  const worker = new Worker(store, { queues: ['fa'], concurrency: 2, tracer: tracerProvider.getTracer('test'), pollIntervalMs: 50 });
  worker.register('split', async (_job, ctx) => {
    await ctx.flow.add([{ ref: 'page-1', type: 'page', queue: 'fa', dependsOn: ['pages'] }]);
  });
  worker.register('page', async () => 'read');
  await runWorkerUntil(
    worker,
    async () => {
      const { rows } = await store.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM q_jobs_all WHERE flow_id = $1 AND status = 'succeeded'`,
        [flowId],
      );
      return rows[0]!.n === 2;
    },
    { timeoutMs: 30_000, drainMs: 5_000 },
  );
  const root = spans.getFinishedSpans().find((s) => s.name === 'q.flows.create' && s.attributes['q.flow.id'] === flowId)!;
  const nodes = spans.getFinishedSpans().filter((s) => s.name === 'q.jobs.process' && s.attributes['q.flow.id'] === flowId);
  expect(nodes.map((s) => s.attributes['q.flow.ref']).sort()).toEqual(['page-1', 'pages']);
  for (const s of nodes) expect(s.parentSpanContext?.spanId).toBe(root.spanContext().spanId);
});
