// A handler's outcome and its checks (docs/design/requests.md): what `handle` may return, and how
// the runner turns it into the store's terms before writing anything: no I/O, no state, the same
// checks the store applies.
import { isQError } from '@q/schema';
import { checkCompletion, checkEnvelope, type Completion, type Request } from '@q/store';

/**
 * What a handler decided for one request:
 * - `{ result }` — done: the result is written to `result.route` (acked), `expiresAt` in Unix s
 *   (0 or absent = never expires);
 * - `{ retryAt, envelope? }` — run it again, not before `retryAt` (Unix s), optionally with a new
 *   envelope (e.g. a retry counter); the payload is kept;
 * - `{ defer }` — put it back unchanged, not dispatched again before `defer` (Unix s).
 *
 * Times may be fractional (`Date.now() / 1000 + 2`): they are rounded up to the next whole
 * second, so "not before" and "kept until" still hold; a `retryAt`/`defer` in the past (or
 * negative) means at once. The rest is checked exactly as the store checks it (`checkCompletion`,
 * `checkEnvelope` of `@q/store`): a route must be non-empty text without NUL or lone surrogates
 * of at most 2,048 bytes, a payload or envelope text without NUL or lone surrogates of at most
 * `MAX_VALUE_BYTES`, `expiresAt` not negative. An outcome that fails these checks counts as
 * "no valid outcome" (see `handle`): it is logged and fails that request alone.
 */
export type Outcome =
  { result: { route: string; payload: string; expiresAt?: number } } | { retryAt: number; envelope?: string } | { defer: number };

/**
 * A handler's outcome, checked and in the store's terms. `reason` of `invalid` says what was
 * wrong (it names fields, never values).
 */
export type Settlement =
  | { kind: 'result'; completion: Completion }
  | { kind: 'retry'; at: number; envelope: string }
  | { kind: 'defer'; at: number }
  | { kind: 'invalid'; reason: string };

/** A Unix-seconds time of an outcome: a finite number, rounded up to a whole second. */
function seconds(v: unknown): number | undefined {
  if (typeof v !== 'number' || !Number.isFinite(v)) return undefined;
  const s = Math.ceil(v);
  return Number.isSafeInteger(s) ? s : undefined;
}

/** Why a store check refused a value (its message names the field, never the value). */
function refusal(err: unknown): string {
  if (isQError(err)) return err.message;
  throw err;
}

/** Checks a handler's return value and puts it in the store's terms. */
export function settlementOf(v: unknown, req: Request): Settlement {
  const invalid = (reason: string): Settlement => ({ kind: 'invalid', reason });
  if (!v || typeof v !== 'object') return invalid('not an outcome object');
  const o = v as Record<string, unknown>;
  if ('result' in o) {
    const r = o.result as Record<string, unknown> | null;
    if (!r || typeof r !== 'object') return invalid('result must be an object');
    let expiresAt = 0;
    if (r.expiresAt !== undefined && r.expiresAt !== null) {
      const s = seconds(r.expiresAt);
      if (s === undefined || s < 0) return invalid('result.expiresAt must be a non-negative number of Unix seconds');
      expiresAt = s;
    }
    try {
      const completion = checkCompletion(
        { id: req.id, token: req.token, attempt: req.attempt, route: r.route, payload: r.payload, expiresAt },
        'result',
      );
      return { kind: 'result', completion };
    } catch (err) {
      return invalid(refusal(err));
    }
  }
  if ('retryAt' in o) {
    const at = seconds(o.retryAt);
    if (at === undefined) return invalid('retryAt must be a finite number of Unix seconds');
    let envelope = req.envelope;
    if (o.envelope !== undefined) {
      try {
        envelope = checkEnvelope(o.envelope, 'envelope');
      } catch (err) {
        return invalid(refusal(err));
      }
    }
    return { kind: 'retry', at: Math.max(0, at), envelope };
  }
  if ('defer' in o) {
    const at = seconds(o.defer);
    if (at === undefined) return invalid('defer must be a finite number of Unix seconds');
    return { kind: 'defer', at: Math.max(0, at) };
  }
  return invalid('no result, retryAt or defer');
}
