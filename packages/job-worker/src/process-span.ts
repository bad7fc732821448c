import type { Tracer } from '@opentelemetry/api';
import { withConsumerSpan } from '@q/otel';
import type { Job } from '@q/store/jobs';

/**
 * Runs one attempt inside its `q.jobs.process` span (active for the handler, so its own spans
 * and statements nest under it), linked to the producer's span through the payload's
 * `traceparent`. A failure sets status ERROR with the error as given (the worker passes only the
 * message's first line).
 */
export function processSpan<T>(tracer: Tracer, job: Job, fn: () => Promise<T>): Promise<T> {
  return withConsumerSpan(tracer, 'q.jobs.process', fn, {
    attributes: { 'job.type': job.type, 'job.queue': job.queue, 'job.attempt': job.attempt },
    traceparent: payloadTraceparent(job.payload),
  });
}

/** The payload's `traceparent` when it is an object carrying a string one. */
function payloadTraceparent(payload: unknown): string | undefined {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return undefined;
  const tp = (payload as { traceparent?: unknown }).traceparent;
  return typeof tp === 'string' ? tp : undefined;
}
