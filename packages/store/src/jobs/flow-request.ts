// The request of an inference step (a flow node `{ ref, request }`, #41): checked before anything
// is written, then turned into the request-queue row the flow insert writes in its transaction
// (sql/insert-flow-requests.ts). The envelope is the dispatcher's (docs/design/dispatcher.md#envelope),
// with the flow's result route, so the reference dispatcher serves it as any request.
import { randomBytes, randomUUID } from 'node:crypto';
import { invalidArgument } from '@q/schema';
import { checkName } from '@q/schema/internal';
import { jsonText } from './json.js';
import { FLOW_ROUTE_PREFIX, type FlowRequest } from './types.js';

/** An inference step's request, checked: what its node's row and its request row are made of. */
export interface CheckedFlowRequest {
  /** The request id (a random UUID), shown in the node's payload. */
  id: string;
  queue: string;
  /** Unix seconds. */
  deadline: number;
  /** The model's body, JSON text. */
  body: string;
  tenant: string | null;
}

/**
 * Checks the request of node `named` (its JSON-quoted ref), or throws `INVALID_ARGUMENT` naming
 * the node and the field, never the value: a queue name, a JSON payload, a deadline in whole Unix
 * seconds not already past, an optional tenant name.
 */
export function checkFlowRequest(named: string, request: unknown, nowSeconds = Date.now() / 1000): CheckedFlowRequest {
  if (!request || typeof request !== 'object' || Array.isArray(request)) {
    throw invalidArgument(`flow: node ${named} request must be an object { queue, payload, deadline, tenant? }`);
  }
  const r = request as Partial<FlowRequest>;
  const queue = checkName('flow', `node ${named} request.queue`, r.queue);
  if (!('payload' in r) || r.payload === undefined) throw invalidArgument(`flow: node ${named} request.payload must be given (any JSON value)`);
  const json = jsonText(r.payload, 'it', 'strict');
  if ('problem' in json) throw invalidArgument(`flow: node ${named} request.payload must be storable JSON: ${json.problem}`);
  const body = json.text ?? 'null';
  const deadline = r.deadline;
  if (typeof deadline !== 'number' || !Number.isSafeInteger(deadline) || deadline <= 0) {
    throw invalidArgument(`flow: node ${named} request.deadline must be whole Unix seconds`);
  }
  if (deadline < Math.floor(nowSeconds)) throw invalidArgument(`flow: node ${named} request.deadline must not be past`);
  const tenant = r.tenant === undefined || r.tenant === null ? null : checkName('flow', `node ${named} request.tenant`, r.tenant);
  return { id: randomUUID(), queue, deadline, body, tenant };
}

/** The result route of a flow's requests: a result written there finishes its node (jobs migration 0015). */
export function flowRoute(flowId: string): string {
  return `${FLOW_ROUTE_PREFIX}${flowId}`;
}

/** The request row of a checked request in the flow `flowId`: a fresh token, the dispatcher's envelope, the body's bytes. */
export function flowRequestRow(
  flowId: string,
  r: CheckedFlowRequest,
): { id: string; token: string; queue: string; deadline: number; envelope: string; payload: Buffer } {
  const token = randomBytes(16).toString('hex');
  const envelope = {
    internal: { request_token: token, request_queue_name: r.queue, result_queue_name: flowRoute(flowId) },
    request_kind: 'plain',
    data: { id: r.id, deadline: r.deadline, ...(r.tenant === null ? {} : { metadata: { userid: r.tenant } }) },
  };
  return { id: r.id, token, queue: r.queue, deadline: r.deadline, envelope: JSON.stringify(envelope), payload: Buffer.from(r.body, 'utf8') };
}
