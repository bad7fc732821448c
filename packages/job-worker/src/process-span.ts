import { SpanKind, context, trace, type Tracer } from '@opentelemetry/api';
import { linksFromTraceparent, recordError } from '@q/otel';
import type { Job } from '@q/store';

/**
 * Runs one attempt inside its `q.jobs.process` span (active for the handler, so its own spans
 * and statements nest under it). The span starts a trace of its own, **linked** to the
 * producer's span when the payload carries a valid `traceparent`: a job runs later, maybe more
 * than once, so it is not a child of the enqueue. A failure sets status ERROR with the error
 * as given (the worker passes only the message's first line).
 */
export async function processSpan<T>(tracer: Tracer, job: Job, fn: () => Promise<T>): Promise<T> {
  const span = tracer.startSpan('q.jobs.process', {
    kind: SpanKind.CONSUMER,
    root: true,
    attributes: { 'job.type': job.type, 'job.queue': job.queue, 'job.attempt': job.attempt },
    links: linksFromTraceparent(payloadTraceparent(job.payload)),
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

/** The payload's `traceparent` when it is an object carrying a string one. */
function payloadTraceparent(payload: unknown): string | undefined {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return undefined;
  const tp = (payload as { traceparent?: unknown }).traceparent;
  return typeof tp === 'string' ? tp : undefined;
}
