import { context, createTraceState, isSpanContextValid, trace, type Context, type Link, type SpanContext } from '@opentelemetry/api';

// W3C Trace Context level 1: version-traceid-parentid-flags, lower-case hex. A future version
// (not 00) may append fields after the flags.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * The W3C `traceparent` of the span active in `ctx` (default: the active context), or
 * `undefined` when there is none — always the case without a registered SDK context manager
 * (no allocation then). Producers put it in a request's envelope or a job's payload so the
 * consumer can link its processing span back: see {@link linksFromTraceparent}.
 */
export function currentTraceparent(ctx: Context = context.active()): string | undefined {
  const span = trace.getSpan(ctx);
  if (!span) return undefined;
  return formatTraceparent(span.spanContext());
}

/** The `traceparent` header value of `sc`, or `undefined` for an invalid span context. */
export function formatTraceparent(sc: SpanContext): string | undefined {
  if (!isSpanContextValid(sc)) return undefined;
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * Parses a W3C `traceparent` (and optional `tracestate`) into a remote span context, or
 * `undefined` when absent or malformed (version `ff`, all-zero ids, wrong length, upper case).
 */
export function parseTraceparent(traceparent?: string | null, tracestate?: string | null): SpanContext | undefined {
  if (typeof traceparent !== 'string') return undefined;
  const m = TRACEPARENT.exec(traceparent.trim());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  const sc: SpanContext = { traceId, spanId, traceFlags: parseInt(flags, 16), isRemote: true };
  if (!isSpanContextValid(sc)) return undefined;
  if (tracestate) sc.traceState = createTraceState(tracestate);
  return sc;
}

/**
 * Links for a consumer's processing span: one link to the producer's span when `traceparent`
 * is a valid W3C traceparent, else `[]`. Pass them as `tracer.startSpan(name, { links })`.
 * Queued work is processed later and possibly more than once, so it gets its own trace linked to
 * the producer's rather than a child span of it.
 */
export function linksFromTraceparent(traceparent?: string | null): Link[] {
  const sc = parseTraceparent(traceparent);
  return sc ? [{ context: sc }] : [];
}

/**
 * `base` (default: the active context) with the producer's span from `traceparent` as the
 * remote parent, for consumers that continue the producer's trace instead of linking to it (the
 * dispatcher's `process-request`, whose parent comes from the request metadata). Returns `base`
 * unchanged when `traceparent` is absent or malformed.
 */
export function contextFromTraceparent(traceparent?: string | null, tracestate?: string | null, base: Context = context.active()): Context {
  const sc = parseTraceparent(traceparent, tracestate);
  return sc ? trace.setSpanContext(base, sc) : base;
}
