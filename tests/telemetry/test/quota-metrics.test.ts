import { METRIC } from '@q/otel';
import { QuotaStore } from '@q/quota';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { exported, memoryTelemetry } from './tracing.js';

const tel = memoryTelemetry();
let schema: TestSchema;
let quota: QuotaStore;

beforeAll(async () => {
  schema = await createTestSchema('tel_quota');
  quota = await QuotaStore.open(schema.dsn, { maxConns: 2, tracerProvider: tel.tracerProvider, meterProvider: tel.meterProvider });
});
afterAll(async () => {
  await quota?.close();
  await schema?.drop();
  await tel.shutdown();
});

it('counts grants and refusals by key class, never by raw key', async () => {
  expect(await quota.admitQuota('tenant:user-4711', 3, 2, 60_000)).toBe(2);
  await quota.registerQuotaHolder('h1', 30_000);
  expect(await quota.acquireQuotaSlots('h1', 'model.big:user-4711', 2, 5)).toBe(2);
  expect(await quota.acquireQuotaSlots('h1', 'user-4711', 1, 0)).toBe(0);

  const all = await tel.metrics();
  const series = (name: string) =>
    Object.fromEntries(
      (all.get(name)?.dataPoints ?? []).map((p) => [`${p.attributes['quota.kind']}/${p.attributes['quota.key_class']}`, p.value]),
    );
  expect(series(METRIC.quotaGrants)).toEqual({ 'rate/tenant': 2, 'slots/model.big': 2 });
  expect(series(METRIC.quotaRefusals)).toEqual({ 'rate/tenant': 1, 'slots/other': 1 });
  expect(JSON.stringify([...all.values()].map((m) => m.dataPoints.map((p) => p.attributes)))).not.toContain('4711');

  const admit = tel.spans().find((s) => s.name === 'q.quota.admit')!;
  expect(admit.attributes).toEqual({ 'quota.key_class': 'tenant' });
  const stmts = tel.spans().filter((s) => s.parentSpanContext?.spanId === admit.spanContext().spanId);
  expect(stmts.length).toBeGreaterThanOrEqual(1);
  for (const s of tel.spans()) expect(exported(s)).not.toContain('4711');
});
