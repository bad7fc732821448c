import { ROOT_CONTEXT, SpanKind, TraceFlags, context, trace, type Context, type Link, type Span, type Tracer } from '@opentelemetry/api';
import { firstLine, formatTraceparent, linksFromTraceparent, recordError } from '@q/otel';
import type { Job, JobLease } from '@q/store/jobs';
import { errorFields, type Logger } from './logger.js';
import type { HandlerContext, HandlerFunc } from './options.js';

/**
 * Starts one attempt's `q.jobs.process` span (kind CONSUMER): a trace of its own, linked to the
 * producer's span through the payload's `traceparent`. The attempt runs the handler with
 * {@link runInSpan} and ends the span with `span.end()` or {@link endFailed}.
 *
 * This is the whole per-job cost of tracing that q adds to the SDK's own span: no copy of the
 * worker's context, no closure or promise of its own, and no link array for a job without a
 * `traceparent` (see bench `otel-job-drain` for what a span costs).
 */
export function startProcessSpan(tracer: Tracer, job: Job): Span {
  const tp = payloadTraceparent(job.payload);
  const links: Link[] | undefined = tp === undefined ? undefined : linksFromTraceparent(tp);
  const flow = job.flow;
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
    flow === undefined ? ROOT_CONTEXT : flowContext(flow.id),
  );
}

/**
 * The context every node of flow `flowId` starts its span under, so that a flow is one trace:
 * trace id the flow's id (its 32 hex digits), parent span id its last 16 (a span no process
 * records: the flow's root), sampled. Derived from the id alone, so any worker finds it without
 * a read.
 */
export function flowContext(flowId: string): Context {
  const hex = flowId.replace(/-/g, '').toLowerCase();
  const spanId = /^0+$/.test(hex.slice(16)) ? '0000000000000001' : hex.slice(16);
  return trace.setSpanContext(ROOT_CONTEXT, { traceId: hex, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true });
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
  const own = formatTraceparent(span.spanContext());
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

/** The payload's `traceparent` when it is an object carrying a string one. */
function payloadTraceparent(payload: unknown): string | undefined {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return undefined;
  const tp = (payload as { traceparent?: unknown }).traceparent;
  return typeof tp === 'string' ? tp : undefined;
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
