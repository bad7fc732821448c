/**
 * The producer's W3C `traceparent` carried in a job's payload: written by the producer
 * (`enqueue`, `flow`, `ctx.flow.add`), read by the worker's `q.jobs.process` span.
 */

/**
 * The payload with `traceparent` added, when it is a plain object (or absent: stored as `{}`)
 * without a `traceparent` of its own; anything else is returned as it is. The caller's object is
 * never modified.
 */
export function withTraceparent(payload: unknown, traceparent: string): unknown {
  if (payload === undefined || payload === null) return { traceparent };
  if (typeof payload !== 'object' || Array.isArray(payload)) return payload;
  const proto = Object.getPrototypeOf(payload) as unknown;
  if (proto !== Object.prototype && proto !== null) return payload;
  // Own `traceparent` wins; a `toJSON` would decide the stored shape itself.
  if (Object.hasOwn(payload, 'traceparent') || typeof (payload as { toJSON?: unknown }).toJSON === 'function') return payload;
  return { ...(payload as Record<string, unknown>), traceparent };
}

/** The payload's `traceparent` when it is an object carrying a string one. */
export function payloadTraceparent(payload: unknown): string | undefined {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return undefined;
  const tp = (payload as { traceparent?: unknown }).traceparent;
  return typeof tp === 'string' ? tp : undefined;
}
