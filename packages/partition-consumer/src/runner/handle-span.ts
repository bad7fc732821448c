import { SpanKind, context, trace, type Tracer } from '@opentelemetry/api';
import { linksFromTraceparent, recordError } from '@q/otel';

/** Envelopes longer than this are not searched for a traceparent (it is a tracing nicety). */
const MAX_ENVELOPE_SCAN = 64 * 1024;

/**
 * Runs one request's handler inside its `q.partition-consumer.handle` span (active for the
 * handler). The span starts a trace of its own, **linked** to the producer's span when the
 * envelope is a JSON object with a valid W3C `traceparent` field: a request is handled later,
 * maybe more than once, so it is not a child of the enqueue. A failure records the scrubbed
 * error with status ERROR and is rethrown.
 */
export async function handleSpan<T>(
  tracer: Tracer,
  envelope: unknown,
  attributes: Record<string, string | number>,
  fn: () => Promise<T>,
): Promise<T> {
  const span = tracer.startSpan('q.partition-consumer.handle', {
    kind: SpanKind.CONSUMER,
    root: true,
    attributes,
    links: linksFromTraceparent(envelopeTraceparent(envelope)),
  });
  try {
    return await context.with(trace.setSpan(context.active(), span), fn);
  } catch (err) {
    recordError(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/**
 * The `traceparent` field of an envelope that is a JSON object, else `undefined`. Never throws:
 * an envelope is the producer's opaque text and may be anything.
 */
export function envelopeTraceparent(envelope: unknown): string | undefined {
  if (typeof envelope !== 'string' || envelope.length > MAX_ENVELOPE_SCAN) return undefined;
  // Cheap checks first: most envelopes without the field are never parsed.
  if (!envelope.includes('traceparent') || envelope.trimStart()[0] !== '{') return undefined;
  try {
    const v: unknown = JSON.parse(envelope);
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
    const tp = (v as { traceparent?: unknown }).traceparent;
    return typeof tp === 'string' ? tp : undefined;
  } catch {
    return undefined;
  }
}
