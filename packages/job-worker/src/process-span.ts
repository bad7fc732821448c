import { ROOT_CONTEXT, SpanKind, context, trace, type Link, type Tracer } from '@opentelemetry/api';
import { firstLine, linksFromTraceparent, recordError } from '@q/otel';
import type { Job } from '@q/store/jobs';
import type { HandlerContext, HandlerFunc } from './options.js';

/**
 * Runs one attempt's handler inside its `q.jobs.process` span (kind CONSUMER, active for the
 * handler, so its own spans and statements nest under it): a trace of its own, linked to the
 * producer's span through the payload's `traceparent`. A failure sets status ERROR with the first
 * line of the error's message only (messages are the handler's and can be long); the handler's
 * own error is rethrown unchanged.
 *
 * The per-job cost is what tracing overhead is made of: the span starts from the root context
 * (no copy of the active context to drop its span, as `root: true` does), the handler is called
 * through `context.with`'s arguments (no closure, no async wrapper), and a job without a
 * `traceparent` allocates no link array.
 */
export function processSpan(tracer: Tracer, job: Job, handler: HandlerFunc, ctx: HandlerContext): Promise<unknown> {
  const tp = payloadTraceparent(job.payload);
  const links: Link[] | undefined = tp === undefined ? undefined : linksFromTraceparent(tp);
  const span = tracer.startSpan(
    'q.jobs.process',
    {
      kind: SpanKind.CONSUMER,
      attributes: { 'job.type': job.type, 'job.queue': job.queue, 'job.attempt': job.attempt },
      ...(links !== undefined && links.length > 0 ? { links } : {}),
    },
    ROOT_CONTEXT,
  );
  let result: Promise<unknown>;
  try {
    result = context.with(trace.setSpan(context.active(), span), handler, undefined, job, ctx);
  } catch (err) {
    endFailed(span, err);
    throw err;
  }
  return Promise.resolve(result).then(
    (value) => {
      span.end();
      return value;
    },
    (err: unknown) => {
      endFailed(span, err);
      throw err;
    },
  );
}

function endFailed(span: ReturnType<Tracer['startSpan']>, err: unknown): void {
  const message = err instanceof Error ? err.message : String(err);
  recordError(span, new Error(firstLine(message) || 'job failed'));
  span.end();
}

/** The payload's `traceparent` when it is an object carrying a string one. */
function payloadTraceparent(payload: unknown): string | undefined {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return undefined;
  const tp = (payload as { traceparent?: unknown }).traceparent;
  return typeof tp === 'string' ? tp : undefined;
}
