// The life of one dispatched request (docs/design/dispatcher.md#handling-one-request, #http-request, #gates, #loops): dequeue checks,
// quota gates, the HTTP attempt, classification, and the decision: a result, a retry parked in
// place, or back to pending.
import { context, defaultTextMapGetter, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { DispatcherConfig, GateConfig, QueueConfig } from '../config/schema.js';
import {
  cancelledResult,
  deadlineExceededResult,
  encodeResult,
  errorResult,
  httpResult,
  invalidDeadlineResult,
  parseEnvelope,
  routeProblem,
  unparsableResult,
  type Envelope,
  type ResultMessage,
} from '../formats.js';
import type { InferenceClient } from '../http/client.js';
import { buildHeaders, joinUrl } from '../http/headers.js';
import { retryBackoffSeconds } from '../http/retry.js';
import { errInfo, type Logger } from '../logger.js';
import type { DispatcherMetrics } from '../metrics.js';
import type { Gate, GateMessage, GateRelease, Verdict } from '../gates/gates.js';
import type { KeyLoad } from './admission.js';
import { laneOf, type WorkerPool } from './pool.js';
import type { CancelBatcher } from './cancel-batcher.js';
import type { Outcome, QueuedRequest, QuotaPort, Release } from './ports.js';

/** Everything a handler needs. */
export interface HandlerDeps {
  queue: QueueConfig;
  config: Pick<DispatcherConfig, 'request_timeout_ms' | 'retry_base_ms' | 'retry_cap_ms' | 'fairness_header' | 'fairness_attribute'>;
  client: InferenceClient;
  cancels: CancelBatcher;
  /** Required when the queue has gates. */
  quota?: QuotaPort;
  metrics: DispatcherMetrics;
  logger: Logger;
  /** Aborted when the dispatcher starts stopping: gate waits end, the request goes back to pending. */
  stopping?: AbortSignal;
  random?: () => number;
  /** Traces `process-request` spans when given. */
  tracer?: Tracer;
  /** This process's view of the quota keys (admission at dispatch reads it). */
  load?: KeyLoad;
  /** The queue gate's per-message decision (docs/design/dispatcher.md#gates): Refuse → back to pending, Drop → result. */
  queueGate?: Gate;
  /** The pool gate (docs/design/dispatcher.md#gates): Continue / Wait (parked up to `gateWaitTimeoutMs`) / Refuse / Drop. */
  poolGate?: Gate;
  /** The worker pool of this queue: a request waits here for one of its workers. */
  pool?: WorkerPool;
  /**
   * Set when `pool` is a `tier-priority` pool: every request it sends carries its lane in
   * `header` ("" = none), or, for a lane listed in `laneObjectives`, that objective instead.
   */
  tierPriority?: { header: string; laneObjectives: Readonly<Record<string, string>> };
  /** Bound of a pool-gate wait, ms (0 = until the deadline); then back to pending. */
  gateWaitTimeoutMs?: number;
  /** Pool metrics (pool-gate decisions). Default: `metrics`. */
  poolMetrics?: DispatcherMetrics;
  /** Called with every final result (the demo's live tallies). */
  onResult?: (result: ResultMessage, metadata: Record<string, string> | undefined) => void;
}

/** The default result route when neither the queue nor the request names one. */
export const DEFAULT_ROUTE = 'result-sql';

const nowSec = () => Date.now() / 1000;
const W3C = new W3CTraceContextPropagator();
const CANCEL_CHECK_THROTTLE_MS = 1000;

/** Creates the `handle(req, signal)` function of one queue's partition worker. */
export function createHandler(deps: HandlerDeps): (req: QueuedRequest, signal?: AbortSignal) => Promise<Outcome> {
  const { queue, config, metrics, logger } = deps;
  const rnd = deps.random ?? Math.random;
  // Concurrency gates first: waiting for a slot must not burn rate admissions.
  const gates = [...queue.gates].sort((a, b) => (a.kind === b.kind ? 0 : a.kind === 'concurrency' ? -1 : 1));
  if (gates.length > 0 && !deps.quota) throw new Error(`queue ${queue.queue_name}: gates need a quota client`);

  const routeOf = (env: Envelope | undefined) => queue.result_queue_name || env?.internal.result_queue_name || DEFAULT_ROUTE;
  const finish = (env: Envelope | undefined, req: QueuedRequest, result: ResultMessage, route = routeOf(env)): Outcome => {
    result.request_token = req.token;
    metrics.result(result.status_code, result.error_code);
    deps.onResult?.(result, env?.data.metadata);
    const ttl = env?.internal.result_ttl_seconds ?? queue.result_ttl_seconds;
    return { result: { route, payload: encodeResult(result), ...(ttl > 0 ? { expiresAt: Math.floor(nowSec()) + ttl } : {}) } };
  };
  /**
   * The result when the deadline ends a request (docs/design/dispatcher.md#retry-algorithm): its last complete HTTP response if it
   * had one (a 429/5xx kept between retries), else `DEADLINE_EXCEEDED`.
   */
  const atDeadline = (env: Envelope, req: QueuedRequest): Outcome => {
    metrics.exceededOnly();
    const last = env.internal.last_response;
    return finish(env, req, last ? httpResult(req.id, last.status_code, last.payload) : deadlineExceededResult(req.id));
  };
  const backToPending = (): Outcome => ({ defer: Math.floor(nowSec()) });

  // Requests parked at a concurrency gate wake as soon as a slot of their key is released here
  // (the timer covers releases by other dispatchers).
  const parked = new Map<string, Set<() => void>>();
  const wake = (key: string) => {
    for (const w of parked.get(key) ?? []) w();
  };
  const releaseAll = (held: Held[]) => {
    for (const h of held.splice(0)) {
      void Promise.resolve()
        .then(() => h.release())
        .catch(() => undefined) // a failed release retires the holder inside Quota
        .then(() => {
          deps.load?.released(h.key, Date.now() - h.since);
          wake(h.key);
        });
    }
  };
  const refuse = (held: Held[], key: string): { refused: string } => {
    deps.load?.refused(key);
    releaseAll(held);
    return { refused: key };
  };

  /** Acquires every gate or none. A refusal or an error leaves nothing held. */
  async function tryGates(env: Envelope, labels: Record<string, string>): Promise<Held[] | { refused: string } | 'error'> {
    const held: Held[] = [];
    const quota = deps.quota;
    if (!quota) return held; // no gates: createHandler refuses gates without a quota client
    for (const g of gates) {
      const value = env.data.metadata?.[g.attribute];
      if (!value) continue; // no key → not gated (docs/design/dispatcher.md#gates)
      const key = `${g.prefix}${g.attribute}:${value}`;
      try {
        if (g.gating_mode === 'classifying') {
          // Never blocks (docs/design/dispatcher.md#gates): a granted slot is held and labels the request reserved.
          const release = await quota.acquire(key, g.limit);
          labels.classification = release === null ? 'overflow' : 'reserved';
          if (release !== null) {
            deps.load?.acquired(key);
            held.push({ key, release, since: Date.now() });
          }
          continue;
        }
        if (g.kind === 'concurrency') {
          const release = await quota.acquire(key, g.limit);
          if (release === null) return refuse(held, key);
          deps.load?.acquired(key);
          held.push({ key, release, since: Date.now() });
        } else if (!(await quota.admit(key, g.limit, g.window_ms))) {
          return refuse(held, key);
        }
      } catch (err) {
        logger.warn({ queue: queue.queue_name, ...errInfo(err) }, 'quota gate error');
        releaseAll(held);
        return 'error';
      }
    }
    return held;
  }

  async function passGates(req: QueuedRequest, env: Envelope, labels: Record<string, string>): Promise<Held[] | Outcome> {
    const waitMs = Math.max(0, ...gates.map((g: GateConfig) => g.wait_ms));
    const started = Date.now();
    let delay = 100;
    let counted = false;
    let lastCancelCheck = Date.now();
    // The key this request waits on, counted in the admission's view while it waits, so the
    // dispatch admits just enough waiters to take a freed slot at once (see KeyLoad.saturated).
    let waitingOn: string | undefined;
    const stopWaiting = () => {
      if (waitingOn !== undefined) deps.load?.waitEnded(waitingOn);
      waitingOn = undefined;
    };
    try {
      for (;;) {
        const r = await tryGates(env, labels);
        if (Array.isArray(r)) return r;
        if (r === 'error') {
          metrics.gateDecision('error');
          return backToPending();
        }
        if (!counted) metrics.gateDecision('quota_exhausted');
        counted = true;
        const now = Date.now();
        if (now >= req.deadline * 1000) return atDeadline(env, req);
        if (now - started >= waitMs || deps.stopping?.aborted) return backToPending();
        if (now - lastCancelCheck >= CANCEL_CHECK_THROTTLE_MS) {
          lastCancelCheck = now;
          const c = await checkCancelled(req);
          if (c === 'error') return { retryAt: Math.ceil(nowSec() + 1) };
          if (c) return finish(env, req, cancelledResult(req.id));
        }
        const sleep = Math.min(delay * (0.5 + rnd() / 2), started + waitMs - now, req.deadline * 1000 - now);
        if (waitingOn !== r.refused) {
          stopWaiting();
          waitingOn = r.refused;
          deps.load?.waitStarted(r.refused);
        }
        await parkUntil(parked, r.refused, Math.max(1, sleep), deps.stopping);
        delay = Math.min(1000, delay * 2);
      }
    } finally {
      stopWaiting();
    }
  }

  async function checkCancelled(req: QueuedRequest): Promise<boolean | 'error'> {
    try {
      return await deps.cancels.isCancelled({ id: req.id, token: req.token });
    } catch (err) {
      logger.warn({ queue: queue.queue_name, ...errInfo(err) }, 'cancellation check failed');
      return 'error';
    }
  }

  return async function handle(req: QueuedRequest, signal?: AbortSignal): Promise<Outcome> {
    const pulledAt = Date.now();
    const env = parseEnvelope(req.envelope);
    if (!env) return finish(undefined, req, unparsableResult(req.id));
    const retryCount = env.internal.retry_count ?? 0;
    metrics.pulled(retryCount, undefined);
    // A route the store would refuse (written by another producer) would fail the result write
    // for ever: answer on the default route instead, without calling the endpoint.
    const bad = routeProblem(routeOf(env));
    if (bad) {
      logger.warn({ queue: queue.queue_name, id: req.id }, `result route ${bad}; INVALID_REQUEST written to ${DEFAULT_ROUTE}`);
      return finish(env, req, errorResult(req.id, 'INVALID_REQUEST', `result route ${bad}`), DEFAULT_ROUTE);
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

    const held = gates.length > 0 ? await passGates(req, env, msg.labels) : [];
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
      const out = await passPoolGate(req, env, msg, gateReleases, signal);
      if (out) {
        releaseAll(held);
        runReleases();
        return out;
      }
    }
    try {
      if (!deps.tracer) return await attempt(req, env, msg.labels, retryCount, pulledAt, signal);
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
        const out = await context.with(trace.setSpan(parent, span), () => attempt(req, env, msg.labels, retryCount, pulledAt, signal, span));
        return out;
      } finally {
        span.end();
      }
    } finally {
      releaseAll(held);
      runReleases();
    }
  };

  /** The send and its classification (docs/design/dispatcher.md#http-classification, #retry-algorithm). */
  async function attempt(
    req: QueuedRequest,
    env: Envelope,
    labels: Record<string, string>,
    retryCount: number,
    pulledAt: number,
    signal: AbortSignal | undefined,
    span?: Span,
  ): Promise<Outcome> {
    const failed = (category: string, message: string) => {
      span?.setAttribute('error.category', category);
      span?.setStatus({ code: SpanStatusCode.ERROR, message });
    };
    {
      // Right before the send: a request cancelled while it waited must not reach the endpoint.
      // Throttled (one real check per second per message): the dispatch itself
      // read the flag, so a request that did not wait needs no second look.
      if (Date.now() - pulledAt >= CANCEL_CHECK_THROTTLE_MS) {
        const c = await checkCancelled(req);
        if (c === 'error') return { retryAt: Math.ceil(nowSec() + 1) }; // fail closed, docs/design/dispatcher.md#retry-algorithm
        if (c) return finish(env, req, cancelledResult(req.id));
      }

      const url = joinUrl(queue.igw_base_url, env.data.endpoint || queue.request_path_url);
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
      metrics.attempt(performance.now() - t0);

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
            random: rnd,
          });
          metrics.retry(out.category === 'RATE_LIMIT');
          // Keep the last complete response: if the deadline ends the retries, it is the result.
          const internal = { ...env.internal, retry_count: retryCount + 1 };
          if (!out.incomplete) internal.last_response = { status_code: out.status, payload: out.body };
          const next: Envelope = { ...env, internal };
          logger.debug({ queue: queue.queue_name, id: req.id, backoff, category: out.category }, 'retry scheduled');
          return { retryAt: Math.ceil(now + backoff), envelope: JSON.stringify(next) };
        }
      }
    }
  }

  /** The pool-gate loop (docs/design/dispatcher.md#gates); `undefined` = admitted (releases pushed to `releases`). */
  async function passPoolGate(
    req: QueuedRequest,
    env: Envelope,
    msg: GateMessage,
    releases: GateRelease[],
    signal?: AbortSignal,
  ): Promise<Outcome | undefined> {
    const gate = deps.poolGate;
    if (!gate) return undefined; // called only with a pool gate
    const pm = deps.poolMetrics ?? metrics;
    const started = Date.now();
    const waitMs = deps.gateWaitTimeoutMs ?? 300_000;
    const ac = new AbortController();
    const onAbort = () => ac.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    deps.stopping?.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(onAbort, Math.max(0, Math.min(waitMs > 0 ? waitMs : Infinity, req.deadline * 1000 - Date.now(), 2_147_483_647)));
    let delay = 100;
    let counted = false;
    try {
      for (;;) {
        let v: Verdict;
        try {
          v = await gate.apply(msg, releases, ac.signal);
        } catch (err) {
          if (Date.now() >= req.deadline * 1000) return atDeadline(env, req);
          if (ac.signal.aborted) return backToPending(); // stop, lease lost or gate-wait timeout
          pm.gateDecision('error');
          return finish(env, req, errorResult(req.id, 'GATE_ERROR', `Pool gating error: ${(err as Error).message}`));
        }
        if (v.kind === 'continue') return undefined;
        if (v.kind === 'refuse') {
          pm.gateDecision(v.overflow ? 'quota_exhausted' : 'gate_closed');
          return backToPending();
        }
        if (v.kind === 'drop') {
          pm.gateDecision('dropped');
          return finish(env, req, dropResult(req.id, v));
        }
        if (!counted) pm.gateDecision('gate_closed');
        counted = true;
        const now = Date.now();
        if (now >= req.deadline * 1000) return atDeadline(env, req);
        if (ac.signal.aborted || (waitMs > 0 && now - started >= waitMs)) return backToPending();
        await sleep(Math.min(delay * (0.5 + rnd() / 2), req.deadline * 1000 - now), ac.signal);
        delay = Math.min(1000, delay * 2);
      }
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      deps.stopping?.removeEventListener('abort', onAbort);
    }
  }
}

/** The priority stamp of a request in `lane` (docs/design/dispatcher.md#headers). */
function priorityOf(tp: NonNullable<HandlerDeps['tierPriority']>, lane: number): { lane: number; header: string; objective?: string } {
  const objective = Object.hasOwn(tp.laneObjectives, String(lane)) ? tp.laneObjectives[String(lane)] : undefined;
  return { lane, header: tp.header, ...(objective !== undefined ? { objective } : {}) };
}

/** A gate's Drop as a result: its own result, else `GATE_DROPPED` (docs/design/dispatcher.md#result-message). */
function dropResult(id: string, v: Extract<Verdict, { kind: 'drop' }>): ResultMessage {
  return v.result ? { id, ...v.result } : errorResult(id, 'GATE_DROPPED', 'Pool gating dropped request');
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, Math.max(1, ms));
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

interface Held {
  key: string;
  release: Release;
  /** When the slot was acquired (ms): its hold time sizes how fast parked requests come back. */
  since: number;
}

/** Sleeps `ms`, or less: until a slot of `key` is released here, or `signal` aborts. */
function parkUntil(parked: Map<string, Set<() => void>>, key: string, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    let set = parked.get(key);
    if (!set) parked.set(key, (set = new Set()));
    set.add(done);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      const s = parked.get(key);
      s?.delete(done);
      if (s?.size === 0) parked.delete(key);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
