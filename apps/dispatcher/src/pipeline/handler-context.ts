// What every stage of one request's handling shares (handler.ts, quota-gates.ts, pool-gate.ts,
// attempt.ts): the handler's dependencies and the ways a request can end (a result, a deadline,
// back to pending).
import type { Tracer } from '@opentelemetry/api';
import { MAX_VALUE_BYTES } from '@q/store';
import type { DispatcherConfig, QueueConfig } from '../config/schema.js';
import { deadlineExceededResult, encodeResult, errorResult, httpResult, type Envelope, type ResultMessage } from '../formats.js';
import type { Gate, Verdict } from '../gates/gates.js';
import type { InferenceClient } from '../http/client.js';
import { errInfo, type Logger } from '../logger.js';
import type { DispatcherMetrics } from '../metrics.js';
import type { AdaptiveConcurrency } from './adaptive-concurrency.js';
import type { KeyLoad } from './admission.js';
import type { CancelBatcher } from './cancel-batcher.js';
import { isResultTtl } from './envelope-check.js';
import type { WorkerPool } from './pool.js';
import type { Outcome, QueuedRequest, QuotaPort } from './ports.js';

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
  /**
   * Adaptive concurrency per endpoint: the calls of requests whose result route `applies` wait
   * for a slot of their endpoint's AIMD window (batch traffic, `batch_api.adaptive_concurrency`).
   */
  adaptive?: { limiter: AdaptiveConcurrency; applies(route: string): boolean };
  /** Called with every final result (the demo's live tallies). */
  onResult?: (result: ResultMessage, metadata: Record<string, string> | undefined) => void;
}

/** The default result route when neither the queue nor the request names one. */
export const DEFAULT_ROUTE = 'result-sql';

/** Now, in Unix seconds (fractional). */
export const nowSec = (): number => Date.now() / 1000;

/** At most one real cancellation lookup per second per waiting message. */
export const CANCEL_CHECK_THROTTLE_MS = 1000;

/** One handler's dependencies plus the endings every stage may choose. */
export interface HandlerContext {
  deps: HandlerDeps;
  /** `deps.random` or `Math.random` (jitter of every wait and backoff). */
  random: () => number;
  /** The result route of a request: the queue's, else the request's, else `DEFAULT_ROUTE`. */
  routeOf(env: Envelope | undefined): string;
  /** Ends the request with `result` (counted, stamped with the token, given its TTL). */
  finish(env: Envelope | undefined, req: QueuedRequest, result: ResultMessage, route?: string): Outcome;
  /** Ends the request at its deadline. */
  atDeadline(env: Envelope, req: QueuedRequest): Outcome;
  /** Back to pending now, no result. */
  backToPending(): Outcome;
  /** Whether the request was cancelled; `'error'` when the lookup failed (logged). */
  checkCancelled(req: QueuedRequest): Promise<boolean | 'error'>;
}

/** Builds the shared context of one queue's handler. */
export function createHandlerContext(deps: HandlerDeps): HandlerContext {
  const { queue, metrics, logger } = deps;
  const routeOf = (env: Envelope | undefined) => queue.result_queue_name || env?.internal.result_queue_name || DEFAULT_ROUTE;
  const finish = (env: Envelope | undefined, req: QueuedRequest, given: ResultMessage, route = routeOf(env)): Outcome => {
    given.request_token = req.token;
    // Checked here, before the write: a result row the store refuses would fail the request and
    // run it again, repeating the inference call.
    let payload = encodeResult(given);
    const result = fits(payload) ? given : tooLargeResult(req, given, payload);
    if (result !== given) payload = encodeResult(result);
    metrics.result(result.status_code, result.error_code);
    deps.onResult?.(result, env?.data.metadata);
    // An envelope's own TTL only when it is one (a foreign "3600" or 1e300 is answered INVALID_REQUEST).
    const own = env?.internal.result_ttl_seconds;
    const ttl = isResultTtl(own) ? own : queue.result_ttl_seconds;
    return { result: { route, payload, ...(ttl > 0 ? { expiresAt: Math.floor(nowSec()) + ttl } : {}) } };
  };
  return {
    deps,
    random: deps.random ?? Math.random,
    routeOf,
    finish,
    /**
     * The result when the deadline ends a request (docs/design/dispatcher.md#retry-algorithm): its last complete HTTP response if it
     * had one (a 429/5xx kept between retries), else `DEADLINE_EXCEEDED`.
     */
    atDeadline(env, req) {
      metrics.exceededOnly();
      const last = env.internal.last_response;
      return finish(env, req, last ? httpResult(req.id, last.status_code, last.payload) : deadlineExceededResult(req.id));
    },
    backToPending: () => ({ defer: Math.floor(nowSec()) }),
    async checkCancelled(req) {
      try {
        return await deps.cancels.isCancelled({ id: req.id, token: req.token });
      } catch (err) {
        logger.warn({ queue: queue.queue_name, ...errInfo(err) }, 'cancellation check failed');
        return 'error';
      }
    },
  };
}

/** Whether an encoded result (or envelope) fits one row: at most `MAX_VALUE_BYTES` UTF-8 bytes. */
export function fits(text: string): boolean {
  // A UTF-16 unit is at most 3 UTF-8 bytes: most texts are cleared without counting.
  return text.length * 3 <= MAX_VALUE_BYTES || Buffer.byteLength(text, 'utf8') <= MAX_VALUE_BYTES;
}

/** The `INFERENCE_ERROR` that replaces a result too large for its row, naming both sizes. */
function tooLargeResult(req: QueuedRequest, r: ResultMessage, encoded: string): ResultMessage {
  const body = Buffer.byteLength(r.payload, 'utf8');
  const out = errorResult(
    req.id,
    'INFERENCE_ERROR',
    `response body of ${body} bytes is ${Buffer.byteLength(encoded, 'utf8')} bytes as a result (JSON-escaped); a result holds at most ${MAX_VALUE_BYTES} bytes`,
  );
  out.request_token = req.token;
  return out;
}

/** A gate's Drop as a result: its own result, else `GATE_DROPPED` (docs/design/dispatcher.md#result-message). */
export function dropResult(id: string, v: Extract<Verdict, { kind: 'drop' }>): ResultMessage {
  return v.result ? { id, ...v.result } : errorResult(id, 'GATE_DROPPED', 'Pool gating dropped request');
}
