import type { Tracer } from '@opentelemetry/api';
import { withConsumerSpan } from '@q/otel';

/** Envelopes longer than this are not searched for a traceparent (it is a tracing nicety). */
const MAX_ENVELOPE_SCAN = 64 * 1024;

/**
 * Runs one request's handler inside its `q.partition-consumer.handle` span (active for the
 * handler), linked to the producer's span when the envelope is a JSON object with a valid W3C
 * `traceparent` field. A failure records the scrubbed error with status ERROR and is rethrown.
 */
export function handleSpan<T>(tracer: Tracer, envelope: unknown, attributes: Record<string, string | number>, fn: () => Promise<T>): Promise<T> {
  return withConsumerSpan(tracer, 'q.partition-consumer.handle', fn, { attributes, traceparent: envelopeTraceparent(envelope) });
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
