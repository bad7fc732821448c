import { invalidArgument } from '@q/schema';

/** Throws `INVALID_ARGUMENT` unless `v` is a non-empty string. */
export function requireName(v: unknown, what: string): asserts v is string {
  if (typeof v !== 'string' || v.length === 0) throw invalidArgument(`${what} must be a non-empty string`);
}

/** Throws `INVALID_ARGUMENT` unless `v` is a valid `Date`. */
export function requireDate(v: unknown, what: string): asserts v is Date {
  if (!(v instanceof Date) || Number.isNaN(v.getTime())) throw invalidArgument(`${what} must be a valid Date`);
}

/** Throws `INVALID_ARGUMENT` unless `v` is an integer `>= min`. */
export function requireInt(v: unknown, what: string, min: number): asserts v is number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
    throw invalidArgument(`${what} must be an integer >= ${min}`);
  }
}

/** Throws `INVALID_ARGUMENT` unless `v` is an array. */
export function requireArray(v: unknown, what: string): asserts v is unknown[] {
  if (!Array.isArray(v)) throw invalidArgument(`${what} must be an array`);
}
