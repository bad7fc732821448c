import { METRIC, currentTraceparent, jobMetrics, linksFromTraceparent, qTracer, type JobMetrics } from '@q/otel';
import { JobQueue, Worker } from '@q/job-worker';
import type { Histogram } from '@opentelemetry/sdk-metrics';
import { JobStore, type Job } from '@q/store';
import { createTestSchema, runWorkerUntil, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { memoryTelemetry } from './tracing.js';

const tel = memoryTelemetry();
let schema: TestSchema;
let store: JobStore;
let queue: JobQueue;
let metrics: JobMetrics;

beforeAll(async () => {
  schema = await createTestSchema('tel_jobs');
  store = await JobStore.open(schema.dsn, { maxConns: 6, tracerProvider: tel.tracerProvider });
  queue = new JobQueue(store, { knownQueues: ['default'] });
  metrics = jobMetrics(tel.meterProvider);
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
  await tel.shutdown();
});

/** Runs a worker until `done()` holds, then stops it and waits for recorded outcomes. */
async function runWorker(register: (w: Worker) => void, done: () => Promise<boolean>): Promise<void> {
  const worker = new Worker(store, {
    queues: ['default'],
    concurrency: 2,
    metrics,
    tracer: qTracer(tel.tracerProvider),
    retryBaseMs: 10,
    pollIntervalMs: 50,
    maintenanceIntervalMs: 100,
  });
  register(worker);
  await runWorkerUntil(worker, done, { timeoutMs: 45_000, drainMs: 10_000 });
}

const finished = (j: Job | null) => j !== null && ['succeeded', 'dead_letter', 'cancelled'].includes(j.status);

it('a job run produces the completed counter and the duration histogram with type and status', async () => {
  const ok = await queue.enqueue({ type: 'ok' });
  const boom = await queue.enqueue({ type: 'boom', maxAttempts: 1 });
  const flaky = await queue.enqueue({ type: 'flaky', maxAttempts: 2 });
  let flakyRuns = 0;
  await runWorker(
    (w) => {
      w.register('ok', async () => {
        await new Promise((r) => setTimeout(r, 50));
        return { done: true };
      });
      w.register('boom', () => Promise.reject(new Error('boom')));
      w.register('flaky', async () => {
        if (++flakyRuns === 1) throw new Error('first try fails');
        return 'ok';
      });
    },
    async () => {
      const jobs = await Promise.all([ok, boom, flaky].map((j) => queue.get(j.uuid)));
      return jobs.every(finished);
    },
  );
  expect((await queue.get(ok.uuid))?.status).toBe('succeeded');
  expect((await queue.get(boom.uuid))?.status).toBe('dead_letter');
  expect((await queue.get(flaky.uuid))?.status).toBe('succeeded');

  const all = await tel.metrics();
  const completed = all.get(METRIC.jobsCompleted)!;
  expect(completed.descriptor.unit).toBe('{job}');
  const counts = Object.fromEntries(completed.dataPoints.map((p) => [`${p.attributes['job.type']}/${p.attributes['job.status']}`, p.value]));
  expect(counts).toEqual({ 'ok/succeeded': 1, 'boom/dead_letter': 1, 'flaky/failed': 1, 'flaky/succeeded': 1 });

  const duration = all.get(METRIC.jobsDuration)!;
  expect(duration.descriptor.unit).toBe('s');
  const hist = new Map(duration.dataPoints.map((p) => [`${p.attributes['job.type']}/${p.attributes['job.status']}`, p.value as Histogram]));
  expect([...hist.keys()].sort()).toEqual(['boom/dead_letter', 'flaky/failed', 'flaky/succeeded', 'ok/succeeded']);
  for (const h of hist.values()) expect(h.count).toBe(1);
  // Seconds, not milliseconds: the 50 ms handler took at least 0.04 and far less than 50.
  expect(hist.get('ok/succeeded')!.sum).toBeGreaterThanOrEqual(0.04);
  expect(hist.get('ok/succeeded')!.sum).toBeLessThan(30);

  const claimed = all.get(METRIC.jobsClaimed)!;
  expect(claimed.dataPoints).toEqual([expect.objectContaining({ value: 4, attributes: { 'job.queue': 'default' } })]);
});

it("producer → consumer: the job's processing span links to the span that enqueued it", async () => {
  const tracer = tel.tracerProvider.getTracer('test');
  tel.resetSpans();
  let producer: { traceId: string; spanId: string } | undefined;
  const job = await tracer.startActiveSpan('produce', async (span) => {
    const j = await queue.enqueue({ type: 'traced', payload: { n: 1, traceparent: currentTraceparent() } });
    producer = span.spanContext();
    span.end();
    return j;
  });
  let linkedSpanId: string | undefined;
  await runWorker(
    (w) => {
      w.register('traced', async (j) => {
        const { traceparent } = j.payload as { traceparent?: string };
        const span = tracer.startSpan('send-email', { links: linksFromTraceparent(traceparent) });
        linkedSpanId = span.spanContext().spanId;
        span.end();
      });
    },
    async () => finished(await queue.get(job.uuid)),
  );

  const spans = tel.spans();
  const produce = spans.find((s) => s.name === 'produce')!;
  const enqueue = spans.find((s) => s.name === 'q.jobs.enqueue')!;
  expect(enqueue.parentSpanContext?.spanId).toBe(produce.spanContext().spanId);
  const process = spans.find((s) => s.name === 'q.jobs.process')!;
  expect(process.attributes).toMatchObject({ 'job.type': 'traced', 'job.queue': 'default' });
  const linked = spans.find((s) => s.spanContext().spanId === linkedSpanId)!;
  expect(linked.parentSpanContext?.spanId).toBe(process.spanContext().spanId);
  expect(linked.spanContext().traceId).not.toBe(producer!.traceId);
  expect(linked.links.map((l) => l.context)).toEqual([
    expect.objectContaining({ traceId: producer!.traceId, spanId: producer!.spanId, isRemote: true }),
  ]);
});
