import { SpanKind, context, createContextKey, type Attributes, type Tracer } from '@opentelemetry/api';
import { recordError } from './pool.js';

// Polling is not work: an idle worker's empty claims and idle maintenance rounds used to be
// about 9 spans a second. A worker runs those calls untraced and records one span after the
// fact for a round that did something (see `recordSpan`), a metric for one that did not.

/**
 * The OpenTelemetry SDK's suppress-tracing context key (`suppressTracing` of
 * `@opentelemetry/core`, which q does not load on its hot path): `createContextKey` is
 * `Symbol.for` of the description, so this is the very key the SDK's tracers check.
 */
const SUPPRESS_TRACING = createContextKey('OpenTelemetry SDK Context Key SUPPRESS_TRACING');

/**
 * Calls `fn` with tracing suppressed: an SDK tracer gives every span started inside it (q's
 * operation and statement spans, a pg instrumentation's) a non-recording span. Only what `fn`
 * starts synchronously or through its own promise chain is affected: an `await` of the result
 * resumes in the caller's context.
 */
export function untraced<T>(fn: () => T): T {
  return context.with(context.active().setValue(SUPPRESS_TRACING, true), fn);
}

/**
 * Records a finished span `name` that started at `startTime` (epoch ms) and ends now, with
 * `attributes` and, if given, `error` recorded (scrubbed) with status ERROR: the span of an
 * untraced call that turned out to be work.
 */
export function recordSpan(tracer: Tracer, name: string, startTime: number, attributes: Attributes, error?: unknown): void {
  const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, startTime, attributes });
  if (error !== undefined) recordError(span, error);
  span.end();
}
