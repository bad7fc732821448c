// The wire formats of docs/design/dispatcher.md#formats: the public request, the internal envelope stored next to
// the payload, and the result message written to a route.
import { randomBytes } from 'node:crypto';
import { QError, QErrorCode } from '@q/schema';

/** A public request (`api.RequestMessage`, docs/design/dispatcher.md#public-request). */
export interface PublicRequest {
  /** Required; result correlation key and partition hash key. */
  id: string;
  /** Unix seconds; informational. */
  created?: number;
  /** Unix **seconds**, > 0: EDF ordering key; bounds every retry and each HTTP attempt. */
  deadline: number;
  /** Body sent to the inference endpoint as JSON (any JSON value). */
  payload?: unknown;
  /** Opaque pass-through; quota gates and the fairness header read one attribute (`userid`). */
  metadata?: Record<string, string>;
  /** Copied onto the outgoing HTTP request, overriding the defaults. */
  headers?: Record<string, string>;
  /** Per-request path; overrides the queue's `request_path`. */
  endpoint?: string;
  /** Informational. */
  model?: string;
}

/** Framework fields of the envelope (docs/design/dispatcher.md#envelope); all optional. */
export interface EnvelopeInternal {
  retry_count?: number;
  queue_id?: string;
  request_token?: string;
  request_queue_name?: string;
  result_queue_name?: string;
  result_ttl_seconds?: number;
  labels?: Record<string, string>;
  /**
   * The last complete retryable HTTP response (429/5xx) of this request, kept between attempts
   * so that it becomes the result when the deadline ends the retries (docs/design/dispatcher.md#retry-algorithm).
   */
  last_response?: { status_code: number; payload: string };
}

/** What is stored in `q_requests.envelope`: the request without its payload (docs/design/dispatcher.md#envelope). */
export interface Envelope {
  internal: EnvelopeInternal;
  request_kind: 'plain';
  data: Omit<PublicRequest, 'payload'>;
}

/** A result message (docs/design/dispatcher.md#result-message), as written to a route (JSON). */
export interface ResultMessage {
  id: string;
  /** > 0 iff an HTTP response was received. */
  status_code?: number;
  /** Raw response body, or `{"error":"<message>"}` for non-HTTP failures. */
  payload: string;
  error_code?: ErrorCode;
  error_message?: string;
  /** The request generation (SQL transport). */
  request_token?: string;
}

/** `error_code` values of non-HTTP failures. */
export type ErrorCode = 'DEADLINE_EXCEEDED' | 'CANCELLED' | 'GATE_DROPPED' | 'GATE_ERROR' | 'INFERENCE_ERROR' | 'INVALID_REQUEST';

/** A new random request generation token: 16 bytes, hex. */
export function newRequestToken(): string {
  return randomBytes(16).toString('hex');
}

function bad(msg: string): QError {
  return new QError(QErrorCode.INVALID_ARGUMENT, msg);
}

function stringMap(v: unknown, field: string, id: string): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw bad(`request ${JSON.stringify(id)}: ${field} must be an object of strings`);
  for (const [k, x] of Object.entries(v)) {
    if (typeof x !== 'string') throw bad(`request ${JSON.stringify(id)}: ${field}.${k} must be a string`);
  }
  return v as Record<string, string>;
}

/**
 * Validates a decoded public request as the producer does (docs/design/dispatcher.md#producer): id required, deadline an
 * integer > 0 and not already past (`nowSec`). Throws `INVALID_ARGUMENT` naming the field; the
 * message never contains the payload.
 */
export function validateRequest(raw: unknown, nowSec: number): PublicRequest {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw bad('request must be a JSON object');
  const r = raw as Record<string, unknown>;
  if (typeof r.id !== 'string' || r.id.length === 0) throw bad('request: id is required (non-empty string)');
  const id = r.id;
  if (typeof r.deadline !== 'number' || !Number.isInteger(r.deadline) || r.deadline <= 0) {
    throw bad(`request ${JSON.stringify(id)}: deadline must be Unix seconds > 0`);
  }
  if (r.deadline < nowSec) throw bad(`request ${JSON.stringify(id)}: deadline is already past`);
  if (r.created !== undefined && (typeof r.created !== 'number' || !Number.isFinite(r.created))) {
    throw bad(`request ${JSON.stringify(id)}: created must be Unix seconds`);
  }
  if (r.endpoint !== undefined && typeof r.endpoint !== 'string') throw bad(`request ${JSON.stringify(id)}: endpoint must be a string`);
  if (r.model !== undefined && typeof r.model !== 'string') throw bad(`request ${JSON.stringify(id)}: model must be a string`);
  const out: PublicRequest = { id, deadline: r.deadline };
  if (r.created !== undefined) out.created = r.created as number;
  if (r.payload !== undefined) out.payload = r.payload;
  const metadata = stringMap(r.metadata, 'metadata', id);
  if (metadata) out.metadata = metadata;
  const headers = stringMap(r.headers, 'headers', id);
  if (headers) out.headers = headers;
  if (r.endpoint) out.endpoint = r.endpoint as string;
  if (r.model) out.model = r.model as string;
  return out;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Longest result route the store accepts, in UTF-8 bytes (CONTRACT: identifiers ≤ 2,048 bytes). */
export const MAX_ROUTE_BYTES = 2048;

/**
 * Why `route` cannot name a result route, or `undefined` when it can: the store takes a
 * non-empty string of at most {@link MAX_ROUTE_BYTES} UTF-8 bytes without NUL or lone
 * surrogates. Checked at submit (and at dispatch for envelopes written elsewhere), because a
 * route the store refuses would fail the result write for ever.
 */
export function routeProblem(route: unknown): string | undefined {
  if (typeof route !== 'string' || route.length === 0) return 'must be a non-empty string';
  if (route.includes('\0')) return 'must not contain NUL';
  if (LONE_SURROGATE.test(route)) return 'must be valid UTF-8 (no lone surrogates)';
  const bytes = Buffer.byteLength(route, 'utf8');
  if (bytes > MAX_ROUTE_BYTES) return `must be at most ${MAX_ROUTE_BYTES} bytes (got ${bytes})`;
  return undefined;
}

/** Throws `INVALID_ARGUMENT` naming `what` when `route` is not a valid result route. */
export function validateRoute(route: unknown, what = 'route'): string {
  const p = routeProblem(route);
  if (p) throw bad(`${what} ${p}`);
  return route as string;
}

/** Splits a request into the stored envelope (no payload) and the payload bytes (docs/design/dispatcher.md#envelope). */
export function splitPayload(req: PublicRequest, internal: EnvelopeInternal): { envelope: string; payload: Uint8Array } {
  const { payload, ...data } = req;
  const envelope: Envelope = { internal, request_kind: 'plain', data };
  return { envelope: JSON.stringify(envelope), payload: Buffer.from(JSON.stringify(payload ?? {}), 'utf8') };
}

/**
 * Parses a stored envelope; `undefined` when it is not one (unknown kind, empty data, no id,
 * bad deadline) — the caller turns that into an `INVALID_REQUEST` result.
 */
export function parseEnvelope(text: string): Envelope | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const e = v as Partial<Envelope>;
  if (e.request_kind !== 'plain' || typeof e.data !== 'object' || e.data === null) return undefined;
  if (typeof e.data.id !== 'string' || typeof e.data.deadline !== 'number') return undefined;
  if (e.internal !== undefined && (typeof e.internal !== 'object' || e.internal === null)) return undefined;
  return { internal: e.internal ?? {}, request_kind: 'plain', data: e.data };
}

/** The result of an HTTP response (success or error status): status + raw body. */
export function httpResult(id: string, status: number, body: string): ResultMessage {
  return { id, status_code: status, payload: body };
}

/** A non-HTTP failure result: `payload` is `{"error":"<message>"}`. */
export function errorResult(id: string, code: ErrorCode, message: string): ResultMessage {
  return { id, payload: JSON.stringify({ error: message }), error_code: code, error_message: message };
}

export const deadlineExceededResult = (id: string): ResultMessage => errorResult(id, 'DEADLINE_EXCEEDED', 'deadline exceeded');
export const cancelledResult = (id: string): ResultMessage => errorResult(id, 'CANCELLED', 'cancelled');
export const unparsableResult = (id: string): ResultMessage => errorResult(id, 'INVALID_REQUEST', 'unparsable queued request');
export const invalidDeadlineResult = (id: string): ResultMessage =>
  errorResult(id, 'INVALID_REQUEST', 'Failed: deadline is missing or invalid (Unix seconds).');

/** Serialises a result for a route; a result that cannot be serialised becomes the fixed fallback. */
export function encodeResult(r: ResultMessage): string {
  try {
    return JSON.stringify(r);
  } catch {
    return JSON.stringify({ id: r.id, payload: JSON.stringify({ error: 'marshal failed' }) });
  }
}

/** Decodes a stored result; an unparsable one becomes a synthetic `INFERENCE_ERROR` (docs/design/dispatcher.md#producer). */
export function decodeResult(id: string, text: string): ResultMessage {
  try {
    const v = JSON.parse(text) as ResultMessage;
    if (typeof v === 'object' && v !== null && typeof v.id === 'string' && typeof v.payload === 'string') return v;
  } catch {
    /* fall through */
  }
  return errorResult(id, 'INFERENCE_ERROR', 'unparsable result');
}
