// A request's result as a line of a batch's output or error file (the reference format): a 2xx
// answer goes to the output file; another HTTP status or a failure without one (deadline,
// cancel, …) to the error file, the latter with `error { code, message }`.
import { createHash } from 'node:crypto';
import type { BatchLineResult } from '@q/store';
import type { ResultMessage } from '../formats.js';

/** The `id` of a line's answer: stable for its request, so a line written again would be recognised. */
export function answerId(requestId: string): string {
  return `batch_req_${createHash('sha256').update(requestId).digest('hex').slice(0, 32)}`;
}

function parsedBody(payload: string): unknown {
  try {
    return JSON.parse(payload);
  } catch {
    return payload;
  }
}

/** The error code a non-HTTP failure is reported with. */
function errorCode(r: ResultMessage): string {
  switch (r.error_code) {
    case 'DEADLINE_EXCEEDED':
      return 'batch_expired';
    case 'CANCELLED':
      return 'batch_cancelled';
    default:
      return (r.error_code ?? 'inference_error').toLowerCase();
  }
}

/** Token counts from a response body's `usage` (chat/completions/embeddings, or the responses API's names). */
function usageOf(body: unknown): { promptTokens: number; completionTokens: number } {
  const u = (body as { usage?: Record<string, unknown> } | null)?.usage;
  const n = (x: unknown): number => (typeof x === 'number' && Number.isSafeInteger(x) && x >= 0 ? x : 0);
  if (typeof u !== 'object' || u === null) return { promptTokens: 0, completionTokens: 0 };
  return { promptTokens: n(u.prompt_tokens ?? u.input_tokens), completionTokens: n(u.completion_tokens ?? u.output_tokens) };
}

/** The file line of line `lineNo` (`customId`) of a batch, whose request `requestId` ended in `r`. */
export function resultLine(lineNo: number, customId: string, requestId: string, r: ResultMessage): BatchLineResult {
  const status = r.status_code ?? 0;
  const id = answerId(requestId);
  let json: unknown;
  let ok = false;
  let usage = { promptTokens: 0, completionTokens: 0 };
  if (status > 0) {
    const body = parsedBody(r.payload);
    ok = status >= 200 && status < 300;
    if (ok) usage = usageOf(body);
    json = {
      id,
      custom_id: customId,
      response: { status_code: status, request_id: requestId, body },
      error: ok ? null : { code: 'request_failed', message: `The endpoint answered HTTP ${status}.` },
    };
  } else {
    json = { id, custom_id: customId, response: null, error: { code: errorCode(r), message: r.error_message ?? 'request failed' } };
  }
  return { lineNo, ok, line: Buffer.from(`${JSON.stringify(json)}\n`, 'utf8'), ...usage };
}
