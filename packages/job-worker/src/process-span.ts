import { ROOT_CONTEXT, SpanKind, context, trace, type Link, type Span, type Tracer } from '@opentelemetry/api';
import { contextFromTraceparent, firstLine, formatTraceparent, linksFromTraceparent, recordError } from '@q/otel';
import type { Job, JobLease } from '@q/store/jobs';
import { errorFields, type Logger } from './logger.js';
import type { HandlerContext, HandlerFunc } from './options.js';
import { payloadTraceparent } from './payload-traceparent.js';

/**
 * Starts one attempt's `q.jobs.process` span (kind CONSUMER): a trace of its own, linked to the
 * producer's span through the payload's `traceparent`; for a flow node, a child of its flow's
 * root (that `traceparent`), so a flow is one trace. The attempt runs the handler with
 * {@link runInSpan} and ends the span with `span.end()` or {@link endFailed}.
 *
 * This is the whole per-job cost of tracing that q adds to the SDK's own span: no copy of the
 * worker's context, no closure or promise of its own, and no link array for a job without a
 * `traceparent` (see bench `otel-job-drain` for what a span costs).
 */
export function startProcessSpan(tracer: Tracer, job: Job): Span {
  const tp = payloadTraceparent(job.payload);
  const flow = job.flow;
  // A flow node continues its flow's trace (the traceparent its producer wrote, see
  // JobQueue.flow); any other job is a trace of its own, linked to its producer's span.
  const parent = flow !== undefined && tp !== undefined ? contextFromTraceparent(tp, undefined, ROOT_CONTEXT) : ROOT_CONTEXT;
  const links: Link[] | undefined = tp === undefined || parent !== ROOT_CONTEXT ? undefined : linksFromTraceparent(tp);
  return tracer.startSpan(
    'q.jobs.process',
    {
      kind: SpanKind.CONSUMER,
      attributes:
        flow === undefined
          ? { 'job.type': job.type, 'job.queue': job.queue, 'job.attempt': job.attempt }
          : { 'job.type': job.type, 'job.queue': job.queue, 'job.attempt': job.attempt, 'q.flow.id': flow.id, 'q.flow.ref': flow.ref },
      ...(links !== undefined && links.length > 0 ? { links } : {}),
    },
    parent,
  );
}

/**
 * Records a flow node's span (so its children link to it) and adds links to its parents' spans,
 * before the handler runs: one statement, only for flow nodes of a traced worker. A failure is
 * logged and the attempt runs without those links: telemetry never fails a job.
 */
export async function linkFlowParents(
  span: Span,
  lease: JobLease,
  record: (lease: JobLease, traceparent: string) => Promise<string[]>,
  logger: Logger,
): Promise<void> {
  // A node its flow's sampler left out records nothing, so nothing is linked to it.
  const own = span.isRecording() ? formatTraceparent(span.spanContext()) : undefined;
  if (own === undefined) return;
  try {
    const links = (await record(lease, own)).flatMap((tp) => linksFromTraceparent(tp));
    if (links.length > 0) span.addLinks(links);
  } catch (err) {
    logger.warn(errorFields(err), 'could not record a flow node span');
  }
}

/**
 * Calls the handler with `span` active (its own spans and statements nest under it). The context
 * holds the span alone: a job is not part of whatever the worker's loop was started under.
 */
export function runInSpan(span: Span, handler: HandlerFunc, job: Job, ctx: HandlerContext): unknown {
  return context.with(trace.setSpan(ROOT_CONTEXT, span), handler, undefined, job, ctx);
}

/**
 * Ends a failed attempt's span: status ERROR with the first line of the error's message only
 * (messages are the handler's and can be long).
 */
export function endFailed(span: Span, err: unknown): void {
  const message = err instanceof Error ? err.message : String(err);
  recordError(span, new Error(firstLine(message) || 'job failed'));
  span.end();
}

/**
 * Ends a snoozed attempt's span: not an error. It carries `job.snoozed: true` and an event
 * `q.jobs.snoozed` with the delay asked for (`job.snooze_ms`).
 */
export function endSnoozed(span: Span, delayMs: number): void {
  span.setAttribute('job.snoozed', true);
  span.addEvent('q.jobs.snoozed', { 'job.snooze_ms': delayMs });
  span.end();
}
