// One HTTP attempt of a request and its classification (docs/design/dispatcher.md#http-request,
// #http-classification, #retry-algorithm): the last cancellation look, the send, then a result, a
// retry parked in place, or back to pending. The one stage that talks to the inference endpoint.
import { SpanStatusCode, type Span } from '@opentelemetry/api';
import { cancelledResult, errorResult, httpResult, type Envelope } from '../formats.js';
import { buildHeaders, joinUrl } from '../http/headers.js';
import { retryBackoffSeconds } from '../http/retry.js';
import { CANCEL_CHECK_THROTTLE_MS, fits, nowSec, type HandlerContext, type HandlerDeps } from './handler-context.js';
import type { AttemptOutcome } from '../http/client.js';
import type { AdaptiveConcurrency, AdaptiveSlot, CallSignal } from './adaptive-concurrency.js';
import { laneOf } from './pool.js';
import type { Outcome, QueuedRequest } from './ports.js';

/** The send and its classification (docs/design/dispatcher.md#http-classification, #retry-algorithm). */
export async function attempt(
  ctx: HandlerContext,
  req: QueuedRequest,
  env: Envelope,
  labels: Record<string, string>,
  retryCount: number,
  pulledAt: number,
  signal: AbortSignal | undefined,
  span?: Span,
): Promise<Outcome> {
  const { deps, atDeadline, backToPending } = ctx;
  const { queue } = deps;
  const url = joinUrl(queue.igw_base_url, env.data.endpoint || queue.request_path_url);
  let slot: AdaptiveSlot | undefined;
  if (deps.adaptive?.applies(ctx.routeOf(env))) {
    slot = await waitForSlot(deps.adaptive.limiter, url, req.deadline * 1000, signal, deps.stopping);
    if (slot === undefined) return Date.now() >= req.deadline * 1000 ? atDeadline(env, req) : backToPending();
  }
  try {
    return await send(ctx, req, env, url, labels, retryCount, pulledAt, signal, slot, span);
  } finally {
    slot?.done('neutral', 0); // a no-op once the call gave it back with its signal
  }
}

async function send(
  ctx: HandlerContext,
  req: QueuedRequest,
  env: Envelope,
  url: string,
  labels: Record<string, string>,
  retryCount: number,
  pulledAt: number,
  signal: AbortSignal | undefined,
  slot: AdaptiveSlot | undefined,
  span?: Span,
): Promise<Outcome> {
  const { deps, finish, atDeadline, backToPending, checkCancelled } = ctx;
  const { queue, config, metrics, logger } = deps;
  const failed = (category: string, message: string) => {
    span?.setAttribute('error.category', category);
    span?.setStatus({ code: SpanStatusCode.ERROR, message });
  };
  // Right before the send: a request cancelled while it waited must not reach the endpoint.
  // Throttled (one real check per second per message): the dispatch itself
  // read the flag, so a request that did not wait needs no second look.
  if (Date.now() - pulledAt >= CANCEL_CHECK_THROTTLE_MS) {
    const c = await checkCancelled(req);
    if (c === 'error') return { retryAt: Math.ceil(nowSec() + 1) }; // fail closed, docs/design/dispatcher.md#retry-algorithm
    if (c) return finish(env, req, cancelledResult(req.id));
  }

  const headers = buildHeaders({
    objective: queue.inference_objective,
    headers: env.data.headers,
    metadata: env.data.metadata,
    fairnessHeader: config.fairness_header,
    fairnessAttribute: config.fairness_attribute,
    ...(deps.tierPriority ? { priority: priorityOf(deps.tierPriority, laneOf(labels)) } : {}),
  });
  metrics.inflight(1);
  const t0 = performance.now();
  let out;
  try {
    out = await deps.client.send(url, req.payload, headers, req.deadline * 1000, signal);
  } finally {
    metrics.inflight(-1);
  }
  const took = performance.now() - t0;
  metrics.attempt(took);
  slot?.done(callSignal(out), took);

  switch (out.kind) {
    case 'success':
      return finish(env, req, httpResult(req.id, out.status, out.body));
    case 'aborted':
      return backToPending();
    case 'fatal':
      failed(out.category, out.message);
      if (out.timeout === 'deadline') return atDeadline(env, req);
      if (out.status !== undefined) return finish(env, req, httpResult(req.id, out.status, out.body ?? ''));
      return finish(env, req, errorResult(req.id, 'INFERENCE_ERROR', `Failed to send request to inference: ${out.message}`));
    case 'retryable': {
      span?.setAttribute('error.category', out.category);
      const now = nowSec();
      const secondsToDeadline = req.deadline - Math.floor(now);
      if (secondsToDeadline <= 0) {
        if (out.category === 'RATE_LIMIT') metrics.shedOnly();
        // A response whose body never arrived is no answer: an error, never a success.
        if (out.incomplete)
          return finish(env, req, errorResult(req.id, 'INFERENCE_ERROR', `Failed to send request to inference: ${out.message}`));
        metrics.exceededOnly();
        return finish(env, req, httpResult(req.id, out.status, out.body));
      }
      const backoff = retryBackoffSeconds({
        retryCount,
        secondsToDeadline,
        retryAfter: out.retryAfter,
        baseSeconds: config.retry_base_ms / 1000,
        capSeconds: config.retry_cap_ms / 1000,
        random: ctx.random,
      });
      metrics.retry(out.category === 'RATE_LIMIT');
      // Keep the last complete response: if the deadline ends the retries, it is the result.
      const internal = { ...env.internal, retry_count: retryCount + 1 };
      if (!out.incomplete) internal.last_response = { status_code: out.status, payload: out.body };
      let envelope = JSON.stringify({ ...env, internal } satisfies Envelope);
      // Kept only if the envelope still fits its row (the body is stored JSON-escaped): else the
      // retry itself would be refused and the call repeated.
      if (!fits(envelope)) {
        delete internal.last_response;
        envelope = JSON.stringify({ ...env, internal } satisfies Envelope);
      }
      logger.debug({ queue: queue.queue_name, id: req.id, backoff, category: out.category }, 'retry scheduled');
      return { retryAt: Math.ceil(now + backoff), envelope };
    }
  }
}

/** What a call's outcome says of its endpoint's load: a 429 or a 5xx is congestion; no answer says nothing. */
function callSignal(out: AttemptOutcome): CallSignal {
  if (out.kind === 'success') return 'ok';
  if (out.kind === 'retryable') return out.incomplete ? 'neutral' : 'congested';
  if (out.kind === 'fatal' && out.status !== undefined) return out.status === 429 || out.status >= 500 ? 'congested' : 'ok';
  return 'neutral';
}

/**
 * A slot of `url`'s adaptive window, waited for until the request's deadline, its abort or the
 * dispatcher's stop (then `undefined`: the request goes back to pending or ends at its deadline).
 */
async function waitForSlot(
  limiter: AdaptiveConcurrency,
  url: string,
  deadlineMs: number,
  signal: AbortSignal | undefined,
  stopping: AbortSignal | undefined,
): Promise<AdaptiveSlot | undefined> {
  const ac = new AbortController();
  const onAbort = (): void => ac.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  stopping?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted || stopping?.aborted) onAbort();
  const timer = setTimeout(onAbort, Math.max(0, Math.min(deadlineMs - Date.now(), 2_147_483_647)));
  try {
    return await limiter.acquire(endpointKey(url), ac.signal);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    stopping?.removeEventListener('abort', onAbort);
  }
}

/** An endpoint's key (and metric label): the URL without credentials, query or fragment. */
export function endpointKey(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return 'invalid-url';
  }
}

/** The priority stamp of a request in `lane` (docs/design/dispatcher.md#headers). */
function priorityOf(tp: NonNullable<HandlerDeps['tierPriority']>, lane: number): { lane: number; header: string; objective?: string } {
  const objective = Object.hasOwn(tp.laneObjectives, String(lane)) ? tp.laneObjectives[String(lane)] : undefined;
  return { lane, header: tp.header, ...(objective !== undefined ? { objective } : {}) };
}
