import { invalidArgument } from '@q/schema';
import { checkName } from '@q/schema/internal';

// Every check names the operation it guards: messages read `<op>: <what> must …` (CONTRIBUTING.md#validation).

/**
 * Longest delay (ms) a Node timer honours: a longer one fires after 1 ms instead, so a duration
 * option driving a timer (or compared with one) is bounded by it.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Throws `INVALID_ARGUMENT` unless `v` is a name the store can hold: a non-empty string without
 * NUL or lone surrogates, at most 2,048 UTF-8 bytes (a NUL used to pass here and make every
 * later store call fail).
 */
export function requireName(op: string, v: unknown, what: string): asserts v is string {
  checkName(op, what, v);
}

/** Throws `INVALID_ARGUMENT` unless `v` is a valid `Date`. */
export function requireDate(op: string, v: unknown, what: string): asserts v is Date {
  if (!(v instanceof Date) || Number.isNaN(v.getTime())) throw invalidArgument(`${op}: ${what} must be a valid Date`);
}

/** Throws `INVALID_ARGUMENT` unless `v` is an integer `>= min` (and `<= max`). */
export function requireInt(op: string, v: unknown, what: string, min: number, max = Number.MAX_SAFE_INTEGER): asserts v is number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
    if (max === Number.MAX_SAFE_INTEGER) throw invalidArgument(`${op}: ${what} must be an integer >= ${min}`);
    throw invalidArgument(`${op}: ${what} must be an integer from ${min} to ${max}`);
  }
}

/** Throws `INVALID_ARGUMENT` unless `v` is a duration in ms from `min` to {@link MAX_TIMER_MS}. */
export function requireMs(op: string, v: unknown, what: string, min: number): asserts v is number {
  requireInt(op, v, what, min, MAX_TIMER_MS);
}

/** Throws `INVALID_ARGUMENT` unless `v` is an array. */
export function requireArray(op: string, v: unknown, what: string): asserts v is unknown[] {
  if (!Array.isArray(v)) throw invalidArgument(`${op}: ${what} must be an array`);
}

/** Throws `INVALID_ARGUMENT` unless `v` is absent or an object with the method `method` (an OpenTelemetry provider, a logger). */
export function requireOptionalObject(op: string, v: unknown, what: string, ...methods: string[]): void {
  if (v === undefined) return;
  const o = v as Record<string, unknown> | null;
  if (typeof v !== 'object' || o === null || methods.some((m) => typeof o[m] !== 'function')) {
    throw invalidArgument(`${op}: ${what} must be an object with ${methods.map((m) => `${m}()`).join(', ')}`);
  }
}

/** Throws `INVALID_ARGUMENT` unless `v` is shaped like a stamp: `{ id: string, token: string, attempt: integer >= 0 }`. */
export function requireStamp(op: string, v: unknown, what: string): void {
  const s = v as Record<string, unknown> | null;
  if (
    typeof v !== 'object' ||
    s === null ||
    typeof s.id !== 'string' ||
    typeof s.token !== 'string' ||
    typeof s.attempt !== 'number' ||
    !Number.isSafeInteger(s.attempt) ||
    s.attempt < 0
  ) {
    throw invalidArgument(`${op}: ${what} must be a stamp { id, token, attempt }`);
  }
}
