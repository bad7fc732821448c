// The producer side (docs/design/dispatcher.md#producer): submit public requests, cancel them, read results.
import { QError, QErrorCode } from '@q/schema';
import type { NewRequest, RequestStore } from '@q/store';
import type { GateConfig } from '../config/schema.js';
import { quotaKeyProblem } from '../pipeline/envelope-check.js';
import {
  decodeResult,
  newRequestToken,
  splitPayload,
  validateRequest,
  validateRoute,
  type PublicRequest,
  type ResultMessage,
} from '../formats.js';

/** Where submitted requests go. */
export interface SubmitTarget {
  /** Request queue (default `request-sql`). */
  queue?: string;
  /** Result route written into each envelope (used unless the queue config names one). */
  route: string;
  /**
   * The quota gates of the target queue (`queues[].gates`): each request's keys must be ones the
   * quota store accepts. Default: the documented default key, `quota:userid:<metadata.userid>`.
   */
  gates?: ReadonlyArray<Pick<GateConfig, 'prefix' | 'attribute'>>;
}

/** The quota key a queue's gates use unless configured otherwise (prefix `quota:`, attribute `userid`). */
export const DEFAULT_KEY_GATES: ReadonlyArray<Pick<GateConfig, 'prefix' | 'attribute'>> = [{ prefix: 'quota:', attribute: 'userid' }];

/** Default request queue of the SQL producer. */
export const DEFAULT_QUEUE = 'request-sql';

/**
 * Validates the route and every request first (nothing is written when one is invalid:
 * `INVALID_ARGUMENT`), then enqueues them
 * in one transaction: a fresh generation token each, envelope stored apart from the payload.
 * Returns the tokens in input order.
 */
export async function submitRequests(store: Pick<RequestStore, 'enqueue'>, raw: unknown[], target: SubmitTarget): Promise<string[]> {
  // The route is only read when the result is written: a bad one must be refused here, not
  // discovered after the request ran (its result write would then fail for ever).
  validateRoute(target.route, 'route');
  if (target.queue !== undefined) validateRoute(target.queue, 'queue');
  const now = Math.floor(Date.now() / 1000);
  const gates = target.gates ?? DEFAULT_KEY_GATES;
  const reqs: PublicRequest[] = raw.map((r) => {
    const req = validateRequest(r, now);
    // A tenant id the quota store refuses (NUL, over 2,048 bytes) would only fail at dispatch.
    const bad = quotaKeyProblem(gates, req.metadata);
    if (bad) throw new QError(QErrorCode.INVALID_ARGUMENT, `request ${JSON.stringify(req.id)}: ${bad}`);
    return req;
  });
  const queue = target.queue ?? DEFAULT_QUEUE;
  const rows: NewRequest[] = reqs.map((r) => {
    const token = newRequestToken();
    const { envelope, payload } = splitPayload(r, {
      request_token: token,
      request_queue_name: queue,
      queue_id: queue,
      result_queue_name: target.route,
    });
    return { id: r.id, token, queue, deadline: r.deadline, envelope, payload };
  });
  if (rows.length > 0) await store.enqueue(rows);
  return rows.map((r) => r.token);
}

/** A popped result: the decoded message plus its route sequence number. */
export interface PoppedResult {
  seq: number;
  result: ResultMessage;
}

/** Pops up to `limit` results of `route` (FIFO); expired ones are dropped by the store. */
export async function popResults(store: Pick<RequestStore, 'popResults'>, route: string, limit: number): Promise<PoppedResult[]> {
  const rows = await store.popResults(route, Math.floor(Date.now() / 1000), limit);
  return rows.map((r) => ({ seq: r.seq, result: decodeResult(r.id, r.payload) }));
}

/** Up to `limit` results of `route` decoded, left in place: what the next {@link popResults} returns. */
export async function peekResults(store: Pick<RequestStore, 'peekResults'>, route: string, limit: number): Promise<PoppedResult[]> {
  const rows = await store.peekResults(route, Math.floor(Date.now() / 1000), limit);
  return rows.map((r) => ({ seq: r.seq, result: decodeResult(r.id, r.payload) }));
}
