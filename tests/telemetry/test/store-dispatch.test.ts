import { SpanKind } from '@opentelemetry/api';
import { METRIC, observeBacklog } from '@q/otel';
import { RequestStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { exported, memoryTelemetry } from './tracing.js';

const SECRET = 'secret-payload-c0ffee';
const tel = memoryTelemetry();
let schema: TestSchema;
let store: RequestStore;

beforeAll(async () => {
  schema = await createTestSchema('tel_store');
  store = await RequestStore.open(schema.dsn, { maxConns: 4, tracerProvider: tel.tracerProvider, meterProvider: tel.meterProvider });
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
  await tel.shutdown();
});

it('a dispatch produces q.store.dispatch with a child statement span carrying the SQL and no values', async () => {
  await store.ensurePartitions('q1');
  const now = await store.now();
  const leases = await store.acquirePartitions('q1', 'd1', now, 30_000, 64);
  expect(leases).toHaveLength(64);
  const deadline = Math.floor(now.getTime() / 1000) + 3600;
  await store.enqueue([
    {
      id: 'r1',
      token: 't1',
      queue: 'q1',
      deadline,
      envelope: JSON.stringify({ note: SECRET }),
      payload: Buffer.from(SECRET),
    },
  ]);
  tel.resetSpans();

  const got = await store.dispatch('q1', 'd1', now, 10);
  expect(got.map((r) => r.id)).toEqual(['r1']);

  const spans = tel.spans();
  const ops = spans.filter((s) => s.name === 'q.store.dispatch');
  expect(ops).toHaveLength(1);
  const op = ops[0]!;
  expect(op.attributes['q.queue']).toBe('q1');
  const children = spans.filter((s) => s.parentSpanContext?.spanId === op.spanContext().spanId);
  expect(children.length).toBeGreaterThanOrEqual(1);
  for (const stmt of children) {
    expect(stmt.kind).toBe(SpanKind.CLIENT);
    expect(stmt.spanContext().traceId).toBe(op.spanContext().traceId);
    expect(stmt.attributes['db.system']).toBe('postgresql');
    expect(String(stmt.attributes['db.statement'])).toMatch(/\S/);
    expect(stmt.attributes['db.operation']).toMatch(/^[A-Z]+$/);
  }
  // The statement's SQL is recorded, its parameters (owner, queue, now, limit) are not.
  expect(children.some((s) => /\$1/.test(String(s.attributes['db.statement'])))).toBe(true);
  for (const s of spans) {
    expect(exported(s)).not.toContain(SECRET);
    expect(exported(s)).not.toContain('"d1"');
  }

  const metrics = await tel.metrics();
  const dispatched = metrics.get(METRIC.requestsDispatched);
  expect(dispatched?.dataPoints).toEqual([expect.objectContaining({ value: 1, attributes: { queue: 'q1' } })]);
  expect(metrics.get(METRIC.requestsEnqueued)?.dataPoints[0]?.value).toBe(1);
});

it('observeBacklog reports pending requests per queue from the RequestStore', async () => {
  const now = await store.now();
  const deadline = Math.floor(now.getTime() / 1000) + 3600;
  await store.enqueue(
    ['a', 'b', 'c'].map((id) => ({
      id,
      token: 't',
      queue: 'q2',
      deadline,
      envelope: '{}',
      payload: new Uint8Array(),
    })),
  );
  const stop = observeBacklog(tel.meterProvider, store, () => ['q1', 'q2']);
  try {
    const points = (await tel.metrics()).get(METRIC.requestsBacklog)?.dataPoints ?? [];
    const byQueue = Object.fromEntries(points.map((p) => [p.attributes.queue, p.value]));
    expect(byQueue).toEqual({ q1: 0, q2: 3 }); // r1 of q1 is in flight, not pending
  } finally {
    stop();
  }
});

it('a failing operation records the error on the operation span', async () => {
  tel.resetSpans();
  await schema.pool().query('DROP TABLE q_results CASCADE');
  const err = await store.resultDepth('route-1').catch((e: unknown) => e);
  expect(err).toBeInstanceOf(Error);
  const op = tel.spans().find((s) => s.name === 'q.store.resultDepth');
  expect(op?.status.code).toBe(2); // ERROR
  const stmt = tel.spans().find((s) => s.parentSpanContext?.spanId === op?.spanContext().spanId);
  expect(stmt?.status.code).toBe(2);
  expect(stmt?.attributes['db.response.status_code']).toBe('42P01');
});
