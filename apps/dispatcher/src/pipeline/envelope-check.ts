// What a queued envelope must hold before the dispatcher acts on it. Envelopes written by another
// producer skip `submit`'s checks: a field of the wrong type (a `result_ttl_seconds` of "3600" or
// 1e300, a tenant id the quota store refuses) would otherwise break the result write or the quota
// call on every run. Such a request is answered `INVALID_REQUEST` once, without an endpoint call.
import type { GateConfig } from '../config/schema.js';
import { routeProblem, type EnvelopeInternal } from '../formats.js';

/** Longest result TTL an envelope may ask for, s (the config's own bound: a timer-sized value). */
export const MAX_RESULT_TTL_SECONDS = 2_147_483_647;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStringMap = (v: unknown): boolean => isObject(v) && Object.values(v).every((x) => typeof x === 'string');

/** A result TTL the dispatcher can use: an integer from 0 to {@link MAX_RESULT_TTL_SECONDS}. */
export function isResultTtl(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_RESULT_TTL_SECONDS;
}

/** Why `internal` cannot be used, naming the field (never its value); `undefined` when it can. */
export function internalProblem(internal: EnvelopeInternal): string | undefined {
  const i = internal as Record<string, unknown>;
  if (i.retry_count !== undefined && !(typeof i.retry_count === 'number' && Number.isSafeInteger(i.retry_count) && i.retry_count >= 0))
    return 'internal.retry_count must be an integer >= 0';
  if (i.result_ttl_seconds !== undefined && !isResultTtl(i.result_ttl_seconds))
    return `internal.result_ttl_seconds must be an integer from 0 to ${MAX_RESULT_TTL_SECONDS}`;
  for (const f of ['queue_id', 'request_token', 'request_queue_name', 'result_queue_name'] as const) {
    if (i[f] !== undefined && typeof i[f] !== 'string') return `internal.${f} must be a string`;
  }
  if (i.labels !== undefined && !isStringMap(i.labels)) return 'internal.labels must be an object of strings';
  if (i.last_response !== undefined) {
    const r = i.last_response as Record<string, unknown> | null;
    if (!isObject(r) || !(typeof r.status_code === 'number' && Number.isInteger(r.status_code)) || typeof r.payload !== 'string')
      return 'internal.last_response must be { status_code: integer, payload: string }';
  }
  return undefined;
}

/** The quota key of `gate` for a request with `metadata`, or `undefined` when the request does not carry its attribute. */
export function quotaKeyOf(gate: Pick<GateConfig, 'prefix' | 'attribute'>, metadata: Record<string, string> | undefined): string | undefined {
  const value = metadata?.[gate.attribute];
  return value ? `${gate.prefix}${gate.attribute}:${value}` : undefined;
}

/**
 * Why a request with `metadata` cannot pass `gates`: a key the quota store refuses (a NUL, a
 * lone surrogate, over 2,048 bytes), naming the attribute; `undefined` when every key is fine.
 */
export function quotaKeyProblem(gates: ReadonlyArray<Pick<GateConfig, 'prefix' | 'attribute'>>, metadata: unknown): string | undefined {
  if (metadata !== undefined && metadata !== null && !isStringMap(metadata)) return 'metadata must be an object of strings';
  for (const g of gates) {
    const key = quotaKeyOf(g, (metadata ?? undefined) as Record<string, string> | undefined);
    const bad = key === undefined ? undefined : routeProblem(key);
    if (bad) return `metadata.${g.attribute} cannot be a quota key: the key "${g.prefix}${g.attribute}:…" ${bad}`;
  }
  return undefined;
}
