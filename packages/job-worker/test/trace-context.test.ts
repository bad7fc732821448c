// Trace context through the job queue: the producer's traceparent is stored in the payload, and
// the worker's q.jobs.process span links back to it — with the SDK's in-memory exporter.
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { context, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { JobStore, type Job } from '@q/store';
import { createTestSchema, runWorkerUntil, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { JobQueue, Worker } from '../src/index.js';

let schema: TestSchema;
let store: JobStore;
let queue: JobQueue;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer('test');

beforeAll(async () => {
  schema = await createTestSchema('jw_trace');
  store = await JobStore.open(schema.dsn, { maxConns: 4 });
  queue = new JobQueue(store, { knownQueues: ['default'] });
});
afterAll(async () => {
  context.disable();
  await store?.close();
  await schema?.drop();
  await provider.shutdown();
});
beforeEach(async () => {
  await store.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys');
  exporter.reset();
});

const TP = /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/;

it('without a registered context manager nothing is added, even inside a span', async () => {
  const payload = { a: 1 };
  const job = await tracer.startActiveSpan('produce', async (span) => {
    try {
      return await queue.enqueue({ type: 't', payload });
    } finally {
      span.end();
    }
  });
  expect(job.payload).toEqual({ a: 1 });
});

it('enqueue/enqueueMany inside a span store its traceparent in plain-object payloads only', async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const input = { a: 1 };
  const { one, many, spanTp } = await tracer.startActiveSpan('produce', async (span) => {
    try {
      const sc = span.spanContext();
      const one = await queue.enqueue({ type: 't', payload: input });
      const many = await queue.enqueueMany([
        { type: 't' },
        { type: 't', payload: { own: true, traceparent: 'kept-as-is' } },
        { type: 't', payload: [1, 2] },
        { type: 't', payload: 'text' },
        { type: 't', payload: 7 },
        { type: 't', payload: { nested: { x: 1 } } },
      ]);
      return { one, many, spanTp: `00-${sc.traceId}-${sc.spanId}-01` };
    } finally {
      span.end();
    }
  });
  expect(spanTp).toMatch(TP);
  expect(one.payload).toEqual({ a: 1, traceparent: spanTp });
  expect(input).toEqual({ a: 1 }); // the caller's object is not modified
  expect(many.map((j) => j.payload)).toEqual([
    { traceparent: spanTp },
    { own: true, traceparent: 'kept-as-is' },
    [1, 2],
    'text',
    7,
    { nested: { x: 1 }, traceparent: spanTp },
  ]);
  // Stored, not only returned.
  expect((await queue.get(one.uuid))!.payload).toEqual({ a: 1, traceparent: spanTp });
  // Outside any span: nothing added.
  expect((await queue.enqueue({ type: 't', payload: { b: 2 } })).payload).toEqual({ b: 2 });
});

it("each attempt's q.jobs.process span links to the payload's traceparent and is active for the handler", async () => {
  const producer = await tracer.startActiveSpan('produce', async (span) => {
    try {
      await queue.enqueue({ type: 'traced', payload: { n: 1 } });
      return span.spanContext();
    } finally {
      span.end();
    }
  });
  await queue.enqueue({ type: 'traced', payload: { n: 2, traceparent: 'garbage' } });
  await queue.enqueue({ type: 'traced', payload: ['not', 'an', 'object'] });

  const activeIn = new Map<string, string | undefined>();
  let failures = 0;
  const worker = new Worker(store, {
    queues: ['default'],
    concurrency: 2,
    tracer,
    retryBaseMs: 1,
    pollIntervalMs: 50,
    maintenanceIntervalMs: 50,
  });
  worker.register('traced', async (job: Job) => {
    activeIn.set(`${JSON.stringify(job.payload)}#${job.attempt}`, trace.getSpan(context.active())?.spanContext().spanId);
    // The first attempt of the linked job fails: its retry is linked too.
    if ((job.payload as { n?: number }).n === 1 && job.attempt === 1) {
      failures++;
      throw new Error('first attempt fails\nsecond line');
    }
    return 'ok';
  });
  await runWorkerUntil(
    worker,
    async () => {
      const { rows } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'succeeded'`);
      return rows[0]!.n === 3;
    },
    { timeoutMs: 30_000, drainMs: 5_000 },
  );
  expect(failures).toBe(1);
  const spans = exporter.getFinishedSpans().filter((s) => s.name === 'q.jobs.process');
  expect(spans).toHaveLength(4);
  const spanFor = (key: string) => spans.find((s) => s.spanContext().spanId === activeIn.get(key))!;
  const linkedKey = (attempt: number) => [...activeIn.keys()].find((x) => x.startsWith('{"n":1,') && x.endsWith(`#${attempt}`))!;
  for (const attempt of [1, 2]) {
    const s = spanFor(linkedKey(attempt));
    expect(s.links.map((l) => l.context)).toEqual([
      expect.objectContaining({ traceId: producer.traceId, spanId: producer.spanId, isRemote: true }),
    ]);
    // A trace of its own per attempt, not a child of the producer.
    expect(s.spanContext().traceId).not.toBe(producer.traceId);
    expect(s.parentSpanContext).toBeUndefined();
    expect(s.attributes).toMatchObject({ 'job.type': 'traced', 'job.queue': 'default', 'job.attempt': attempt });
  }
  expect(spanFor(linkedKey(1)).status).toMatchObject({ code: 2, message: 'first attempt fails' });
  expect(spanFor('{"n":2,"traceparent":"garbage"}#1').links).toEqual([]);
  expect(spanFor('["not","an","object"]#1').links).toEqual([]);
});

it('a snoozed attempt ends its process span without error, marked snoozed with the delay', async () => {
  await queue.enqueue({ type: 'snoozy' });
  const worker = new Worker(store, { queues: ['default'], concurrency: 1, tracer, pollIntervalMs: 50, maintenanceIntervalMs: 50 });
  worker.register('snoozy', async (job, ctx) => {
    if (job.snoozes === 0) return ctx.snooze(0);
    return 'woke';
  });
  await runWorkerUntil(
    worker,
    async () => {
      const { rows } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'succeeded'`);
      return rows[0]!.n === 1;
    },
    { timeoutMs: 30_000, drainMs: 5_000 },
  );
  const spans = exporter.getFinishedSpans().filter((s) => s.name === 'q.jobs.process');
  expect(spans).toHaveLength(2);
  const [snoozed, woke] = spans;
  expect(snoozed!.attributes['job.snoozed']).toBe(true);
  expect(snoozed!.status.code).not.toBe(2); // SpanStatusCode.ERROR
  expect(snoozed!.events.map((e) => [e.name, e.attributes?.['job.snooze_ms']])).toEqual([['q.jobs.snoozed', 0]]);
  expect(woke!.attributes['job.snoozed']).toBeUndefined();
  // Both runs are attempt 1: the snooze used none.
  expect(spans.map((s) => s.attributes['job.attempt'])).toEqual([1, 1]);
});
