// The process-request span (a child of the submitter's W3C trace context in the request's
// metadata) and the backlog poller gauge (issue #19), against a real dispatcher.
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { beforeAll, describe, expect, it } from 'vitest';
import type { RequestStore } from '@q/store';
import { submitRequests } from '../src/client/producer.js';
import { dispatcherServiceName, type Dispatcher } from '../src/service/dispatcher.js';
import { ok, Results, scenarioOf, submit, waitFor } from './helpers.js';
import { metricsText, useDispatcherEnv } from './support/dispatcher-env.js';

let store: RequestStore;
let d: Dispatcher | undefined;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const env = useDispatcherEnv('obs', {
  behaviour: (call) => (scenarioOf(call).id === 'traced-bad' ? { status: 400, body: 'no' } : ok(scenarioOf(call).id)),
});

beforeAll(async () => {
  ({ store } = env);
  const { server } = env;
  // Five requests nobody will take: their queue's gate is closed (a query against no Prometheus).
  await submit(
    store,
    'held',
    'held-out',
    Array.from({ length: 5 }, (_, i) => ({ id: `h-${i}` })),
  );
  d = await env.start(
    {
      batch_size: 8,
      concurrency: 8,
      metrics_port: 0,
      metrics_backlog_poll_interval_ms: 200,
      prometheus_url: 'http://127.0.0.1:9',
      queues: [
        { queue_name: 'traced', igw_base_url: server.url, result_queue_name: 'traced-out' },
        { queue_name: 'held', igw_base_url: server.url, gate_type: 'prometheus-query', gate_params: { query: 'up' } },
      ],
    },
    { tracerProvider: provider },
  );
});

describe('observability', () => {
  it('process-request is a child of the submitter’s span; a fatal failure sets its status to ERROR', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parentId = '00f067aa0ba902b7';
    const deadline = Math.floor(Date.now() / 1000) + 60;
    await submitRequests(
      store,
      ['traced-ok', 'traced-bad'].map((id) => ({
        id,
        deadline,
        payload: { id },
        metadata: { traceparent: `00-${traceId}-${parentId}-01`, userid: 't' },
      })),
      { queue: 'traced', route: 'traced-out' },
    );
    await new Results(store, 'traced-out').waitFor(['traced-ok', 'traced-bad'], 20_000);
    const spans = (await waitFor(
      () => {
        const s = exporter.getFinishedSpans().filter((x) => x.name === 'process-request');
        return s.length >= 2 ? s : undefined;
      },
      10_000,
      'process-request spans',
    ))!;
    for (const s of spans) {
      expect(s.spanContext().traceId).toBe(traceId);
      expect(s.parentSpanContext?.spanId).toBe(parentId);
      expect(s.attributes).toMatchObject({ 'queue.name': 'traced', 'retry.count': 0 });
    }
    const bad = spans.find((s) => s.attributes['request.id'] === 'traced-bad');
    expect(bad?.status.code).toBe(2); // ERROR
    expect(bad?.attributes['error.category']).toBe('INVALID_REQ');
  });

  it('the backlog poller publishes pending requests per queue', async () => {
    await waitFor(() => d!.backlog.get('held') === 5, 10_000, 'backlog 5');
    const text = await metricsText(d!);
    expect(text).toMatch(/llm_d_async_async_broker_backlog\{[^}]*queue_name="held"[^}]*\} 5/);
    expect(text).toMatch(/llm_d_async_async_broker_backlog_source_available\{[^}]*queue_name="held"[^}]*\} 1/);
  });

  it('without pools: the implicit default pool’s limit is concurrency per queue, and nothing waits for a worker', async () => {
    const text = await metricsText(d!);
    expect(text).toMatch(/llm_d_async_async_pool_worker_limit\{pool_name="default"[^}]*\} 16\n/);
    for (const q of ['traced', 'held']) expect(text).toMatch(new RegExp(`llm_d_async_async_queue_depth\\{[^}]*queue_name="${q}"[^}]*\\} 0\\n`));
  });

  it('the metrics name the service q-dispatcher (not unknown_service:node); OTEL_SERVICE_NAME overrides (issue 17)', async () => {
    const text = await metricsText(d!);
    expect(text).toMatch(/target_info\{[^}]*service_name="q-dispatcher"/);
    expect(text).not.toContain('unknown_service');
    expect(dispatcherServiceName(undefined, {})).toBe('q-dispatcher');
    expect(dispatcherServiceName(undefined, { OTEL_SERVICE_NAME: 'infer-eu' })).toBe('infer-eu');
    expect(dispatcherServiceName('explicit', { OTEL_SERVICE_NAME: 'infer-eu' })).toBe('explicit');
  });
});
