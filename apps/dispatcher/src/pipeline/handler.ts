// The life of one dispatched request (docs/design/dispatcher.md#handling-one-request, #http-request, #gates, #loops): dequeue checks,
// quota gates, the HTTP attempt, classification, and the decision: a result, a retry parked in
// place, or back to pending.
//
// This module runs the stages in order; each stage is its own module: quota-gates.ts (quota keys),
// pool-gate.ts (the pool gate loop), attempt.ts (the send and its classification), with what they
// share (dependencies, the ways a request ends) in handler-context.ts.
import { context, defaultTextMapGetter, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { cancelledResult, errorResult, invalidDeadlineResult, parseEnvelope, routeProblem, unparsableResult } from '../formats.js';
import type { GateMessage, GateRelease, Verdict } from '../gates/gates.js';
import { errInfo } from '../logger.js';
import { attempt } from './attempt.js';
import { internalProblem, quotaKeyProblem } from './envelope-check.js';
import { createHandlerContext, DEFAULT_ROUTE, dropResult, type HandlerDeps } from './handler-context.js';
import { passPoolGate } from './pool-gate.js';
import type { Outcome, QueuedRequest } from './ports.js';
import { createQuotaGates } from './quota-gates.js';

export { DEFAULT_ROUTE, type HandlerDeps } from './handler-context.js';

const W3C = new W3CTraceContextPropagator();

/**
 * The `failureResult` of one queue's partition worker: the answer to a request whose handling
 * kept failing (the worker stopped running it), an `INFERENCE_ERROR` naming why, written without
 * another endpoint call — on the request's route when it is a valid one, else on `result-sql`.
 */
export function createFailureAnswer(
  deps: HandlerDeps,
): (req: QueuedRequest, failure: { failures: number; reason: string }) => { route: string; payload: string; expiresAt?: number } {
  const { routeOf, finish } = createHandlerContext(deps);
  return (req, failure) => {
    const parsed = parseEnvelope(req.envelope);
    const env = parsed && !internalProblem(parsed.internal) ? parsed : undefined;
    const route = routeProblem(routeOf(env)) ? DEFAULT_ROUTE : routeOf(env);
    const message = `request could not be answered after ${failure.failures} failed handling(s): ${failure.reason}`;
    const out = finish(env, req, errorResult(req.id, 'INFERENCE_ERROR', message), route);
    if (!('result' in out)) throw new Error('finish always returns a result');
    return out.result;
  };
}

/** Creates the `handle(req, signal)` function of one queue's partition worker. */
export function createHandler(deps: HandlerDeps): (req: QueuedRequest, signal?: AbortSignal) => Promise<Outcome> {
  const { queue, metrics, logger } = deps;
  const ctx = createHandlerContext(deps);
  const { routeOf, finish, atDeadline, backToPending } = ctx;
  const quotaGates = createQuotaGates(ctx);
  const releaseAll = quotaGates.releaseAll;

  return async function handle(req: QueuedRequest, signal?: AbortSignal): Promise<Outcome> {
    const pulledAt = Date.now();
    const env = parseEnvelope(req.envelope);
    if (!env) return finish(undefined, req, unparsableResult(req.id));
    // docs/dispatcher.md#formats: a foreign envelope's fields are checked before anything uses them.
    const badEnvelope = internalProblem(env.internal) ?? (queue.gates.length > 0 ? quotaKeyProblem(queue.gates, env.data.metadata) : undefined);
    const retryCount = badEnvelope ? 0 : (env.internal.retry_count ?? 0);
    metrics.pulled(retryCount, undefined);
    // A route the store would refuse (written by another producer) would fail the result write
    // for ever: answer on the default route instead, without calling the endpoint.
    const bad = routeProblem(routeOf(env));
    if (bad) {
      logger.warn({ queue: queue.queue_name, id: req.id }, `result route ${bad}; INVALID_REQUEST written to ${DEFAULT_ROUTE}`);
      return finish(env, req, errorResult(req.id, 'INVALID_REQUEST', `result route ${bad}`), DEFAULT_ROUTE);
    }
    if (badEnvelope) {
      logger.warn({ queue: queue.queue_name, id: req.id, problem: badEnvelope }, 'queued request is invalid; INVALID_REQUEST written');
      return finish(env, req, errorResult(req.id, 'INVALID_REQUEST', `queued request: ${badEnvelope}`));
    }
    if (req.cancelled) return finish(env, req, cancelledResult(req.id));
    // docs/design/dispatcher.md#handling-one-request: a missing or non-positive deadline is an invalid request, not an expired one.
    const d = env.data.deadline;
    if (!(req.deadline > 0) || !Number.isInteger(d) || d <= 0) return finish(env, req, invalidDeadlineResult(req.id));
    if (Date.now() >= req.deadline * 1000) return atDeadline(env, req);

    const msg: GateMessage = { id: req.id, metadata: env.data.metadata, labels: { ...queue.labels, ...env.internal.labels } };
    const gateReleases: GateRelease[] = [];
    const runReleases = () => {
      for (const r of gateReleases.splice(0).reverse()) {
        try {
          r();
        } catch {
          /* a release never fails the request */
        }
      }
    };
    if (deps.queueGate) {
      let v: Verdict;
      try {
        v = await deps.queueGate.apply(msg, gateReleases, signal);
      } catch (err) {
        logger.warn({ queue: queue.queue_name, ...errInfo(err) }, 'queue gate error');
        metrics.gateDecision('error');
        runReleases();
        return backToPending();
      }
      // Wait is not handled at queue level: it behaves like Continue (docs/design/dispatcher.md#gates).
      if (v.kind === 'refuse') {
        metrics.gateDecision(v.overflow ? 'quota_exhausted' : 'gate_closed');
        runReleases();
        return backToPending();
      }
      if (v.kind === 'drop') {
        metrics.gateDecision('dropped');
        runReleases();
        return finish(env, req, dropResult(req.id, v));
      }
    }

    const held = quotaGates.active ? await quotaGates.pass(req, env, msg.labels) : [];
    if (!Array.isArray(held)) {
      runReleases();
      return held;
    }
    if (deps.pool) {
      // Wait for one of the pool's workers; the merge policy picks who gets the next one.
      const ac = new AbortController();
      const onAbort = () => ac.abort(new Error('stopping'));
      signal?.addEventListener('abort', onAbort, { once: true });
      deps.stopping?.addEventListener('abort', onAbort, { once: true });
      if (signal?.aborted || deps.stopping?.aborted) onAbort();
      const untilDeadline = setTimeout(
        () => ac.abort(new Error('deadline')),
        Math.max(0, Math.min(req.deadline * 1000 - Date.now(), 2_147_483_647)),
      );
      try {
        gateReleases.push(await deps.pool.acquire(queue.queue_name, msg.labels, ac.signal));
      } catch {
        releaseAll(held);
        runReleases();
        return Date.now() >= req.deadline * 1000 ? atDeadline(env, req) : backToPending();
      } finally {
        clearTimeout(untilDeadline);
        signal?.removeEventListener('abort', onAbort);
        deps.stopping?.removeEventListener('abort', onAbort);
      }
    }
    if (deps.poolGate) {
      const out = await passPoolGate(ctx, req, env, msg, gateReleases, signal);
      if (out) {
        releaseAll(held);
        runReleases();
        return out;
      }
    }
    try {
      if (!deps.tracer) return await attempt(ctx, req, env, msg.labels, retryCount, pulledAt, signal);
      // `process-request` (docs/design/dispatcher.md#metrics): one span per attempt, a child of the submitter's trace when
      // the request's metadata carries W3C trace context.
      const parent = W3C.extract(ROOT_CONTEXT, env.data.metadata ?? {}, defaultTextMapGetter);
      const span = deps.tracer.startSpan(
        'process-request',
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            'request.id': req.id,
            'retry.count': retryCount,
            'queue.id': queue.queue_name,
            'queue.name': queue.queue_name,
            'gen_ai.request.id': req.id,
          },
        },
        parent,
      );
      try {
        const out = await context.with(trace.setSpan(parent, span), () => attempt(ctx, req, env, msg.labels, retryCount, pulledAt, signal, span));
        return out;
      } finally {
        span.end();
      }
    } finally {
      releaseAll(held);
      runReleases();
    }
  };
}
