// The request of an inference step (a flow node `{ ref, request }`, #41): checked before anything
// is written, then carried in the node's payload under `send` to the insert, where the trigger of
// jobs migration 0015 (q_flow_request_send) keeps it per node and sends it whenever the node
// becomes runnable (inserted without parents, released, retried): the request row uses the
// dispatcher's envelope (docs/design/dispatcher.md#envelope) with the flow's result route, so the
// reference dispatcher serves it as any request.
import { invalidArgument } from '@q/schema';
import { checkName } from '@q/schema/internal';
import { jsonText } from './json.js';
import type { FlowRequest } from './types.js';

/** The longest relative deadline, in seconds (a year): more is a unit mistake. */
export const MAX_DEADLINE_SECONDS = 366 * 24 * 3600;

/** An inference step's request, checked. */
export interface CheckedFlowRequest {
  queue: string;
  /** Unix seconds, or null when the deadline is relative. */
  deadline: number | null;
  /** Seconds from the send, or null when the deadline is absolute. */
  deadlineSeconds: number | null;
  /** The model's body, JSON text. */
  body: string;
  tenant: string | null;
}

/**
 * Checks the request of node `named` (its JSON-quoted ref), or throws `INVALID_ARGUMENT` naming
 * the node and the field, never the value: a queue name, a JSON payload, either a deadline in
 * whole Unix seconds not already past or whole `deadlineSeconds` (1 to a year), an optional tenant name.
 */
export function checkFlowRequest(named: string, request: unknown, nowSeconds = Date.now() / 1000): CheckedFlowRequest {
  if (!request || typeof request !== 'object' || Array.isArray(request)) {
    throw invalidArgument(`flow: node ${named} request must be an object { queue, payload, deadline or deadlineSeconds, tenant? }`);
  }
  const r = request as Partial<FlowRequest>;
  const queue = checkName('flow', `node ${named} request.queue`, r.queue);
  if (!('payload' in r) || r.payload === undefined) throw invalidArgument(`flow: node ${named} request.payload must be given (any JSON value)`);
  const json = jsonText(r.payload, 'it', 'strict');
  if ('problem' in json) throw invalidArgument(`flow: node ${named} request.payload must be storable JSON: ${json.problem}`);
  const body = json.text ?? 'null';
  const { deadline, deadlineSeconds } = r;
  if ((deadline === undefined) === (deadlineSeconds === undefined)) {
    throw invalidArgument(`flow: node ${named} request must have either a deadline or deadlineSeconds`);
  }
  if (deadline !== undefined) {
    if (typeof deadline !== 'number' || !Number.isSafeInteger(deadline) || deadline <= 0) {
      throw invalidArgument(`flow: node ${named} request.deadline must be whole Unix seconds`);
    }
    if (deadline < Math.floor(nowSeconds)) throw invalidArgument(`flow: node ${named} request.deadline must not be past`);
  }
  if (deadlineSeconds !== undefined) {
    if (
      typeof deadlineSeconds !== 'number' ||
      !Number.isInteger(deadlineSeconds) ||
      deadlineSeconds < 1 ||
      deadlineSeconds > MAX_DEADLINE_SECONDS
    ) {
      throw invalidArgument(`flow: node ${named} request.deadlineSeconds must be whole seconds from 1 to ${MAX_DEADLINE_SECONDS}`);
    }
  }
  const tenant = r.tenant === undefined || r.tenant === null ? null : checkName('flow', `node ${named} request.tenant`, r.tenant);
  return { queue, deadline: deadline ?? null, deadlineSeconds: deadlineSeconds ?? null, body, tenant };
}

/**
 * The payload of a checked request's node as inserted: what the node shows (`request.queue`; its
 * id and deadline are set when it is sent) and, under `send`, what the insert trigger keeps and
 * strips (jobs migration 0015).
 */
export function flowRequestPayload(r: CheckedFlowRequest): Record<string, unknown> {
  return {
    request: { queue: r.queue },
    send: { queue: r.queue, body: r.body, tenant: r.tenant, deadline: r.deadline, deadline_seconds: r.deadlineSeconds },
  };
}
