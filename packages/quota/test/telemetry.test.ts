import type { Attributes, MeterProvider, Span, TracerProvider } from '@opentelemetry/api';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createQuota } from '../src/index.js';

// Minimal recording providers written against @opentelemetry/api: enough to see what q records.
interface Recorded {
  name: string;
  attributes: Attributes;
}
const spans: Recorded[] = [];
const points: Array<Recorded & { value: number }> = [];

const tracerProvider: TracerProvider = {
  getTracer: () => ({
    startSpan: (name: string, opts?: { attributes?: Attributes }) => {
      const rec: Recorded = { name, attributes: { ...(opts?.attributes ?? {}) } };
      spans.push(rec);
      const span = {
        end: () => undefined,
        setAttribute: (k: string, v: string) => ((rec.attributes[k] = v), span),
        setAttributes: (a: Attributes) => (Object.assign(rec.attributes, a), span),
        setStatus: () => span,
        recordException: () => undefined,
        isRecording: () => true,
        spanContext: () => ({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 1 }),
      };
      return span as unknown as Span;
    },
    startActiveSpan: () => {
      throw new Error('not used');
    },
  }),
};

const counter = (name: string) => ({ add: (value: number, attributes: Attributes = {}) => void points.push({ name, value, attributes }) });
const meterProvider = {
  getMeter: () => ({ createCounter: counter, createHistogram: counter, createUpDownCounter: counter }),
} as unknown as MeterProvider;

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('qotel');
});
afterAll(async () => {
  await schema?.drop();
});

it('records q.quota.<op> spans over statement spans, and grant/refusal counters by key class only', async () => {
  const quota = await createQuota({ dsn: schema.dsn, ttlMs: 5_000, maxConns: 2, tracerProvider, meterProvider });
  try {
    const got = await Promise.all([quota.acquire('tenant:secret-42', 1), quota.acquire('tenant:secret-42', 1)]);
    await got.find(Boolean)!();
    expect(await quota.admit('weird key without class', 1, 1000)).toBe(true);
    expect(await quota.admit('weird key without class', 1, 1000)).toBe(false);
  } finally {
    await quota.close();
  }
  const names = new Set(spans.map((s) => s.name));
  for (const op of ['acquire', 'release', 'admit', 'register_holder', 'delete_holder']) expect(names).toContain(`q.quota.${op}`);
  expect(spans.some((s) => s.attributes['db.system'] === 'postgresql' && String(s.attributes['db.statement']).includes('q_quota_acquire'))).toBe(
    true,
  );
  expect(spans.find((s) => s.name === 'q.quota.acquire')!.attributes).toEqual({ 'quota.key_class': 'tenant' });
  // The raw key never becomes a span or metric attribute.
  expect(JSON.stringify(spans)).not.toContain('secret-42');
  expect(JSON.stringify(points)).not.toContain('secret-42');
  const sum = (name: string, kind: string, cls: string) =>
    points
      .filter((p) => p.name === name && p.attributes['quota.kind'] === kind && p.attributes['quota.key_class'] === cls)
      .reduce((a, p) => a + p.value, 0);
  expect(sum('q.quota.grants', 'slots', 'tenant')).toBe(1);
  expect(sum('q.quota.refusals', 'slots', 'tenant')).toBe(1);
  expect(sum('q.quota.grants', 'rate', 'other')).toBe(1);
  expect(sum('q.quota.refusals', 'rate', 'other')).toBe(1);
});
