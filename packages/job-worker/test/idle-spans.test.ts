// An idle worker traces nothing (issue 34 item 17): no span for an empty claim or an idle
// maintenance round (counted in q.jobs.idle_rounds instead), while a job still gets its
// q.jobs.process span and the round trip that claimed it one span.
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { context } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { jobMetrics, qTracer } from '@q/otel';
import type { JobMetrics } from '@q/otel';
import { JobStore } from '@q/store';
import { createTestSchema, memoryLogger, sleep, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Worker } from '../src/index.js';
import { jobInStatus, waitFor } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  schema = await createTestSchema('jw_idle');
  store = await JobStore.open(schema.dsn, { maxConns: 4, tracerProvider: provider });
});
afterAll(async () => {
  await store?.close();
  context.disable();
  await schema?.drop();
  await provider.shutdown();
});

it('an idle worker records no span, only q.jobs.idle_rounds; a job gets its process span and its claim one', async () => {
  const idle: string[] = [];
  const base = jobMetrics();
  const metrics: JobMetrics = { ...base, idleRounds: { add: (_n, attrs) => void idle.push(String(attrs?.['q.operation'])) } };
  const worker = new Worker(store, {
    queues: ['default'],
    concurrency: 2,
    tracer: qTracer(provider),
    metrics,
    logger: memoryLogger(),
    pollIntervalMs: 50,
    maintenanceIntervalMs: 50,
  });
  worker.register('t', async () => 'ok');
  const ac = new AbortController();
  const run = worker.run(ac.signal);
  try {
    // Past the first rounds (the maintenance leadership is taken once: that round is work).
    await waitFor(() => (idle.includes('claim') && idle.includes('maintenance')) || undefined, 10_000);
    exporter.reset();
    const before = idle.length;
    await sleep(1_500);
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual([]);
    expect(idle.length - before).toBeGreaterThanOrEqual(10);

    const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
    await waitFor(jobInStatus(store, job!.uuid, 'succeeded'), 10_000);
    await waitFor(() => exporter.getFinishedSpans().some((s) => s.name === 'q.jobs.process') || undefined, 5_000);
    const names = exporter.getFinishedSpans().map((s) => s.name);
    expect(names).toContain('q.jobs.worker.claim');
    const claim = exporter.getFinishedSpans().find((s) => s.name === 'q.jobs.worker.claim' && s.attributes['q.jobs.claimed'] === 1);
    expect(claim).toBeDefined();
  } finally {
    ac.abort();
    await run;
    await worker.wait(5_000);
  }
});
