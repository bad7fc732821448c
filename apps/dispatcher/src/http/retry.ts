// Retry timing of docs/design/dispatcher.md#http-classification, #retry-algorithm: Retry-After parsing and the backoff algorithm.

/**
 * Parses a `Retry-After` value into seconds from `nowMs`: an integer ≥ 0, or an HTTP-date
 * (IMF-fixdate, RFC 850, asctime) turned into "until then" (≥ 0). Anything else → `undefined`.
 */
export function parseRetryAfter(value: string | undefined | null, nowMs: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v);
  // Date.parse accepts all three HTTP-date forms; require a weekday name so plain junk is ignored.
  if (!/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? /i.test(v)) return undefined;
  let text = v.replace(/-/g, ' ');
  // asctime carries no zone; HTTP dates are always GMT.
  if (/^\w{3} \w{3} +\d{1,2} \d\d:\d\d:\d\d \d{4}$/.test(text)) text += ' GMT';
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, (at - nowMs) / 1000);
}

/** Inputs of {@link retryBackoffSeconds}. */
export interface BackoffInput {
  /** Retries already made (`internal.retry_count`). */
  retryCount: number;
  /** Whole seconds left until the deadline (> 0). */
  secondsToDeadline: number;
  /** Parsed `Retry-After` seconds, if the response carried one. */
  retryAfter?: number;
  /** Base and cap in seconds (2, 60). */
  baseSeconds: number;
  capSeconds: number;
  /** Random source in [0, 1); injectable for tests. */
  random?: () => number;
}

/** The shortest retry delay a `Retry-After` can ask for, seconds (`Retry-After: 0` included). */
export const MIN_RETRY_AFTER_SECONDS = 0.1;

/**
 * The backoff of `retryMessage` (docs/design/dispatcher.md#retry-algorithm), in seconds (float): equal jitter over
 * `min(cap, secondsToDeadline, base × 2^(retryCount+1))` (1st retry 2–4 s with base 2 s). A `Retry-After` replaces it: one
 * that asks for longer raises it (clamped to half the remaining time), one that asks for less shortens it (to at least
 * 100 ms) — the server knows when it has room, and the own backoff put a `Retry-After: 1` retry 2–4 s out; either plus
 * 0–25 % jitter, so the requests one overload turned away do not all come back in the same instant.
 */
export function retryBackoffSeconds(input: BackoffInput): number {
  const rnd = input.random ?? Math.random;
  const temp = Math.min(input.capSeconds, input.secondsToDeadline, input.baseSeconds * 2 ** (input.retryCount + 1));
  const backoff = temp / 2 + (rnd() * temp) / 2;
  const ra = input.retryAfter;
  if (ra === undefined || !Number.isFinite(ra) || ra < 0) return backoff;
  if (ra > backoff) {
    const clamped = Math.min(ra, input.secondsToDeadline / 2);
    return Math.max(backoff, clamped * (1 + rnd() / 4));
  }
  return Math.min(backoff, Math.max(MIN_RETRY_AFTER_SECONDS, ra) * (1 + rnd() / 4));
}
