import { context, trace } from '@opentelemetry/api';
import { contextFromTraceparent, currentTraceparent, linksFromTraceparent } from '@q/otel';
import { runPartitionWorker } from '@q/partition-consumer';
import { RequestStore, type Result } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { memoryTelemetry, waitFor } from './tracing.js';

const tel = memoryTelemetry();
let schema: TestSchema;
let producer: RequestStore;
let consumer: RequestStore;

beforeAll(async () => {
  schema = await createTestSchema('tel_link');
  // Two stores (two pools), as a producer process and a dispatcher process would have.
  producer = await RequestStore.open(schema.dsn, { maxConns: 2, tracerProvider: tel.tracerProvider });
  consumer = await RequestStore.open(schema.dsn, { maxConns: 4, tracerProvider: tel.tracerProvider });
  await producer.ensurePartitions('links');
});
afterAll(async () => {
  await producer?.close();
  await consumer?.close();
  await schema?.drop();
  await tel.shutdown();
});

it('producer → consumer: the processing span links to the producer span across the request queue', async () => {
  const tracer = tel.tracerProvider.getTracer('test');
  const now = await producer.now();
  const deadline = Math.floor(now.getTime() / 1000) + 600;

  // Producer: the request's envelope carries the traceparent of the active span.
  let produced: { traceId: string; spanId: string } | undefined;
  await tracer.startActiveSpan('produce', async (span) => {
    const traceparent = currentTraceparent();
    expect(traceparent).toBeDefined();
    const envelope = JSON.stringify({ internal: {}, data: { id: 'req-1', metadata: { traceparent } } });
    await producer.enqueue([{ id: 'req-1', token: 'tok', queue: 'links', deadline, envelope, payload: Buffer.from('{}') }]);
    produced = span.spanContext();
    span.end();
  });

  // Consumer: another pool, later, in the dispatcher's poll loop.
  const stop = new AbortController();
  const seen: Array<{ linked: string; child: string }> = [];
  const worker = runPartitionWorker({
    store: consumer,
    queue: 'links',
    owner: 'dispatcher-1',
    concurrency: 2,
    batchSize: 8,
    leaseTtlMs: 3_000,
    drainTimeoutMs: 500,
    pollIntervalMs: 50,
    tracerProvider: tel.tracerProvider,
    signal: stop.signal,
    async handle(req) {
      const meta = (JSON.parse(req.envelope) as { data: { metadata: { traceparent?: string } } }).data.metadata;
      const linked = tracer.startSpan('process-linked', { links: linksFromTraceparent(meta.traceparent) });
      linked.end();
      const child = tracer.startSpan('process-request', {}, contextFromTraceparent(meta.traceparent));
      child.end();
      seen.push({ linked: linked.spanContext().spanId, child: child.spanContext().spanId });
      return { result: { route: 'answers', payload: 'ok' } };
    },
  });
  let results: Result[];
  try {
    results = await waitFor(async () => {
      const r = await producer.popResults('answers', Math.floor(Date.now() / 1000), 10);
      return r.length > 0 ? r : undefined;
    });
  } finally {
    stop.abort();
    await worker;
  }
  expect(results.map((r) => r.id)).toEqual(['req-1']);
  expect(seen).toHaveLength(1);

  const spans = tel.spans();
  const produce = spans.find((s) => s.name === 'produce')!;
  const enqueue = spans.find((s) => s.name === 'q.store.enqueue')!;
  expect(enqueue.parentSpanContext?.spanId).toBe(produce.spanContext().spanId);

  const handle = spans.find((s) => s.name === 'q.partition-consumer.handle')!;
  const linked = spans.find((s) => s.spanContext().spanId === seen[0]!.linked)!;
  // Linked: a span of the consumer's own trace (under the runner's handle span) pointing back.
  expect(linked.parentSpanContext?.spanId).toBe(handle.spanContext().spanId);
  expect(linked.spanContext().traceId).not.toBe(produced!.traceId);
  expect(linked.links).toHaveLength(1);
  expect(linked.links[0]!.context).toMatchObject({ traceId: produced!.traceId, spanId: produced!.spanId, isRemote: true });
  // Continued: the producer span is the remote parent.
  const child = spans.find((s) => s.spanContext().spanId === seen[0]!.child)!;
  expect(child.spanContext().traceId).toBe(produced!.traceId);
  expect(child.parentSpanContext?.spanId).toBe(produced!.spanId);
  // Nothing of the consumer leaked into the producer's context.
  expect(trace.getSpan(context.active())).toBeUndefined();
});
