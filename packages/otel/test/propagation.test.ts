import { context, trace, TraceFlags } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { contextFromTraceparent, currentTraceparent, formatTraceparent, linksFromTraceparent, parseTraceparent } from '../src/index.js';
import { memoryTracing, only } from './tracing.js';

const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('traceparent helpers', () => {
  it('is undefined outside any span (and before a context manager exists)', () => {
    expect(currentTraceparent()).toBeUndefined();
  });

  it('round-trips: producer traceparent → consumer span linked to the producer span', () => {
    const { provider, spans } = memoryTracing();
    const tracer = provider.getTracer('test');
    let carried: string | undefined;
    tracer.startActiveSpan('produce', (span) => {
      carried = currentTraceparent();
      span.end();
    });
    const produce = only(spans(), 'produce');
    expect(carried).toBe(`00-${produce.spanContext().traceId}-${produce.spanContext().spanId}-01`);

    // The consumer runs later, outside the producer's context: a new trace with a link.
    const payload = JSON.parse(JSON.stringify({ job: 1, traceparent: carried })) as { traceparent?: string };
    const consume = tracer.startSpan('consume', { links: linksFromTraceparent(payload.traceparent) }, context.active());
    consume.end();
    const done = only(spans(), 'consume');
    expect(done.links).toHaveLength(1);
    expect(done.links[0]!.context).toMatchObject({
      traceId: produce.spanContext().traceId,
      spanId: produce.spanContext().spanId,
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    });
    expect(done.spanContext().traceId).not.toBe(produce.spanContext().traceId);
    expect(done.parentSpanContext).toBeUndefined();
  });

  it('continues a trace as remote parent with contextFromTraceparent', () => {
    const { provider, spans } = memoryTracing();
    const ctx = contextFromTraceparent(TP, 'vendor=abc');
    const child = provider.getTracer('test').startSpan('process-request', {}, ctx);
    child.end();
    const s = only(spans(), 'process-request');
    expect(s.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(s.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(s.spanContext().traceState?.serialize()).toBe('vendor=abc');
    const base = context.active();
    expect(contextFromTraceparent(undefined, undefined, base)).toBe(base);
    expect(contextFromTraceparent('garbage', undefined, base)).toBe(base);
  });

  it('keeps the unsampled flag', () => {
    const sc = parseTraceparent('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00');
    expect(sc?.traceFlags).toBe(TraceFlags.NONE);
    expect(formatTraceparent(sc!)).toBe('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00');
    const span = trace.wrapSpanContext(sc!);
    expect(currentTraceparent(trace.setSpan(context.active(), span))).toBe('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00');
  });

  it.each([
    [undefined],
    [''],
    ['00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331'], // no flags
    ['00-00000000000000000000000000000000-b7ad6b7169203331-01'], // zero trace id
    ['00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01'], // zero span id
    ['ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'], // forbidden version
    ['00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01'], // upper case
    ['00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra'], // v00 has no extra fields
    ['0af7651916cd43dd8448eb211c80319c'],
  ])('ignores a malformed traceparent %j', (tp) => {
    expect(linksFromTraceparent(tp)).toEqual([]);
    expect(parseTraceparent(tp)).toBeUndefined();
  });

  it('accepts a future version with extra fields', () => {
    expect(linksFromTraceparent('01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what')).toHaveLength(1);
  });
});
