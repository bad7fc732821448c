import { invalidArgument } from '@q/schema';
import { checkName as checkStorableName } from '@q/schema/internal';

/** Largest value of a Postgres `integer` (slot counts and limits are stored as one). */
export const MAX_INT4 = 2_147_483_647;

/** A non-empty string Postgres stores verbatim (no NUL, no lone surrogate, bounded length), else `INVALID_ARGUMENT`. */
export function checkName(what: string, value: unknown): string {
  return checkStorableName('quota', what, value);
}

/** An integer in `[min, max]`, else `INVALID_ARGUMENT`. */
export function checkInt(what: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalidArgument(`${what} must be an integer in [${min}, ${max}]`);
  }
  return value;
}

/** Checks the arguments of a release: equal lengths, non-empty keys, non-negative counts. */
export function checkRelease(keys: unknown, counts: unknown): { keys: string[]; counts: number[] } {
  if (!Array.isArray(keys) || !Array.isArray(counts)) throw invalidArgument('releaseQuotaSlots: keys and counts must be arrays');
  if (keys.length !== counts.length) {
    throw invalidArgument(`releaseQuotaSlots: counts must have one entry per key (${keys.length} keys but ${counts.length} counts)`);
  }
  keys.forEach((k, i) => checkName(`keys[${i}]`, k));
  counts.forEach((c, i) => checkInt(`counts[${i}]`, c, 0, MAX_INT4));
  return { keys: keys as string[], counts: counts as number[] };
}

/** Absent, or an `AbortSignal`, else `INVALID_ARGUMENT` (a raw `TypeError` would come later, from inside). */
export function checkSignal(op: string, signal: unknown): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  if (!(signal instanceof AbortSignal)) throw invalidArgument(`${op}: signal must be an AbortSignal or absent`);
  return signal;
}

const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;

/** Absent, or an object with the `Logger` methods (`debug`, `info`, `warn`, `error`), else `INVALID_ARGUMENT`. */
export function checkLogger(op: string, logger: unknown): void {
  if (logger === undefined) return;
  const l = logger as Record<string, unknown> | null;
  if (typeof logger !== 'object' || l === null || LOG_LEVELS.some((level) => typeof l[level] !== 'function')) {
    throw invalidArgument(`${op}: logger must have debug, info, warn and error methods`);
  }
}

/** Absent, or an object with the method `method` (a telemetry provider), else `INVALID_ARGUMENT`. */
export function checkProvider(op: string, what: string, v: unknown, method: string): void {
  if (v === undefined) return;
  if (typeof v !== 'object' || v === null || typeof (v as Record<string, unknown>)[method] !== 'function') {
    throw invalidArgument(`${op}: ${what} must be an object with a ${method}() method`);
  }
}
