// runPartitionWorker with a tracer provider: each handle span links back to the producer's span
// named by the envelope's `traceparent`; malformed envelopes or traceparents never fail a request.
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { context, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { TestSchema } from '@q/testing';
import type { Request, RequestStore } from '@q/store';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runPartitionWorker } from '../src/index.js';
import { envelopeTraceparent } from '../src/runner/handle-span.js';
import { openTestStore, requests, waitFor } from './helpers.js';

let schema: TestSchema;
let store: RequestStore;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(async () => {
  context.setGlobalContextManager(contextManager.enable());
  ({ schema, store } = await openTestStore('pc_trace', 4));
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
  context.disable();
  await provider.shutdown();
});

const PRODUCER = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331' };
const TP = `00-${PRODUCER.traceId}-${PRODUCER.spanId}-01`;

it('links each handle span to the traceparent of a JSON-object envelope; anything else gets no link and is still handled', async () => {
  const q = 'trace-link';
  const envelopes: Record<string, string> = {
    linked: JSON.stringify({ id: 'linked', traceparent: TP }),
    plain: JSON.stringify({ id: 'plain' }),
    notJson: `{"traceparent": "${TP}"`, // truncated: not JSON
    array: JSON.stringify([{ traceparent: TP }]),
    badTp: JSON.stringify({ traceparent: 'not-a-traceparent' }),
    numberTp: JSON.stringify({ traceparent: 42 }),
    text: `traceparent ${TP}`,
  };
  await store.enqueue(requests(q, Object.keys(envelopes)).map((r) => ({ ...r, envelope: envelopes[r.id]! })));
  const active = new Map<string, string | undefined>();
  const ac = new AbortController();
  const done = runPartitionWorker({
    store,
    queue: q,
    concurrency: 4,
    batchSize: 8,
    leaseTtlMs: 1500,
    drainTimeoutMs: 3000,
    pollIntervalMs: 50,
    signal: ac.signal,
    tracerProvider: provider,
    handle: async (req: Request) => {
      // The handle span is active for the handler.
      active.set(req.id, trace.getSpan(context.active())?.spanContext().spanId);
      return { result: { route: 'trace-out', payload: req.id } };
    },
  });
  await waitFor(async () => {
    const { rows } = await schema.pool().query<{ n: string }>(`SELECT count(*) AS n FROM q_results WHERE route = 'trace-out'`);
    return Number(rows[0]?.n) === Object.keys(envelopes).length;
  });
  ac.abort();
  const stats = await done;
  expect(stats).toMatchObject({ acked: 7, failed: 0 });

  const handles = exporter.getFinishedSpans().filter((s) => s.name === 'q.partition-consumer.handle');
  expect(handles).toHaveLength(7);
  const byId = new Map<string, ReadableSpan>();
  for (const [id, spanId] of active)
    byId.set(
      id,
      handles.find((s) => s.spanContext().spanId === spanId)!,
    );
  const linked = byId.get('linked')!;
  expect(linked.links.map((l) => l.context)).toEqual([
    expect.objectContaining({ traceId: PRODUCER.traceId, spanId: PRODUCER.spanId, isRemote: true }),
  ]);
  // Its own trace, not a child of the producer.
  expect(linked.spanContext().traceId).not.toBe(PRODUCER.traceId);
  expect(linked.parentSpanContext).toBeUndefined();
  for (const id of ['plain', 'notJson', 'array', 'badTp', 'numberTp', 'text']) {
    expect(byId.get(id)?.links, id).toEqual([]);
  }
});

it('envelopeTraceparent reads only a string field of a JSON object', () => {
  expect(envelopeTraceparent(JSON.stringify({ traceparent: TP, other: 1 }))).toBe(TP);
  expect(envelopeTraceparent(`  ${JSON.stringify({ traceparent: TP })}`)).toBe(TP);
  for (const e of [
    undefined,
    null,
    42,
    '',
    '{',
    '[]',
    'null',
    '"traceparent"',
    JSON.stringify({ traceparent: null }),
    `{"traceparent":"${TP}",}`,
  ]) {
    expect(envelopeTraceparent(e)).toBeUndefined();
  }
  // A huge envelope is not scanned.
  expect(envelopeTraceparent(JSON.stringify({ traceparent: TP, pad: 'x'.repeat(70_000) }))).toBeUndefined();
});
