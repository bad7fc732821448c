// Argument checks of the request queue. Every public method checks all of its input before it
// sends a statement, so bad input never leaves anything half-written. Messages name the
// argument, never a payload.
import { invalidArgument } from '@q/schema';
import { checkName, checkText } from '@q/schema/internal';
import type { Completion, Key, NewRequest, Stamp } from './types.js';
import { MAX_VALUE_BYTES, PARTITIONS } from './types.js';

/**
 * Throws `INVALID_ARGUMENT` when `bytes` (the variable-size data of one row) exceed
 * {@link MAX_VALUE_BYTES}: beyond it the statement carrying the row cannot be built (`pg` renders
 * array parameters as one JS string, which has a length limit) or sent (Postgres caps a message).
 */
function capped(op: string, what: string, bytes: number): void {
  if (bytes > MAX_VALUE_BYTES) throw invalidArgument(`${op}: ${what} is ${bytes} bytes; at most ${MAX_VALUE_BYTES} bytes fit in one row`);
}

/** UTF-8 size of `s`. */
export function textBytes(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/** A non-empty identifier Postgres stores verbatim (no NUL, no lone surrogate, bounded length). */
export function text(op: string, what: string, v: unknown): string {
  return checkName(op, what, v);
}

/** The queue and owner that the partition and dispatch calls name: both {@link text}. */
export function queueOwner(op: string, queue: unknown, owner: unknown): void {
  text(op, 'queue', queue);
  text(op, 'owner', owner);
}

/** Any string Postgres stores verbatim (possibly empty). */
export function anyText(op: string, what: string, v: unknown): string {
  return checkText(op, what, v);
}

/** A non-negative safe integer (counts, limits, Unix seconds, durations in ms). */
export function count(op: string, what: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw invalidArgument(`${op}: ${what} must be a non-negative integer`);
  }
  return v;
}

/** A 32-bit batch limit. */
export function limit(op: string, v: unknown): number {
  const n = count(op, 'limit', v);
  if (n > 2_147_483_647) throw invalidArgument(`${op}: limit must be at most 2147483647`);
  return n;
}

/** A valid `Date`; returns its Unix milliseconds. */
export function instant(op: string, what: string, v: unknown): number {
  if (!(v instanceof Date) || Number.isNaN(v.getTime())) throw invalidArgument(`${op}: ${what} must be a valid Date`);
  return v.getTime();
}

/** An optional OpenTelemetry provider: absent, or an object with the method `method`. */
export function provider(op: string, what: string, v: unknown, method: string): void {
  if (v === undefined) return;
  if (typeof v !== 'object' || v === null || typeof (v as Record<string, unknown>)[method] !== 'function') {
    throw invalidArgument(`${op}: ${what} must be an object with a ${method}() method`);
  }
}

export function bool(op: string, what: string, v: unknown): boolean {
  if (typeof v !== 'boolean') throw invalidArgument(`${op}: ${what} must be a boolean`);
  return v;
}

/** An array (possibly empty). */
export function list<T>(op: string, what: string, v: unknown): T[] {
  if (!Array.isArray(v)) throw invalidArgument(`${op}: ${what} must be an array`);
  return v as T[];
}

/** Partition numbers 0–63, deduplicated. */
export function partitions(op: string, v: unknown): number[] {
  const out = new Set<number>();
  for (const p of list<unknown>(op, 'partitions', v)) {
    if (typeof p !== 'number' || !Number.isInteger(p) || p < 0 || p >= PARTITIONS) {
      throw invalidArgument(`${op}: partitions must be integers from 0 to ${PARTITIONS - 1}`);
    }
    out.add(p);
  }
  return [...out];
}

export function key(op: string, v: unknown, i: number): Key {
  if (typeof v !== 'object' || v === null) throw invalidArgument(`${op}: keys[${i}] must be an object`);
  const k = v as Key;
  return { id: text(op, `keys[${i}].id`, k.id), token: text(op, `keys[${i}].token`, k.token) };
}

export function stamp(op: string, v: unknown, i: number): Stamp {
  return stampAs(op, `stamps[${i}]`, v);
}

/** One stamp, named `what` in messages (`stamp` for the calls that take one, `stamps[i]` in a list). */
export function stampAs(op: string, what: string, v: unknown): Stamp {
  if (typeof v !== 'object' || v === null) throw invalidArgument(`${op}: ${what} must be an object`);
  const s = v as Stamp;
  return {
    id: text(op, `${what}.id`, s.id),
    token: text(op, `${what}.token`, s.token),
    attempt: count(op, `${what}.attempt`, s.attempt),
  };
}

export function completion(op: string, v: unknown, i: number): Required<Completion> {
  return completionAs(op, `completions[${i}]`, v);
}

/** One completion, named `what` in messages (the check of `RequestStore.ack`, shared with the runner). */
export function completionAs(op: string, what: string, v: unknown): Required<Completion> {
  if (typeof v !== 'object' || v === null) throw invalidArgument(`${op}: ${what} must be an object`);
  const c = v as Completion;
  const out = {
    id: text(op, `${what}.id`, c.id),
    token: text(op, `${what}.token`, c.token),
    attempt: count(op, `${what}.attempt`, c.attempt),
    route: text(op, `${what}.route`, c.route),
    payload: anyText(op, `${what}.payload`, c.payload),
    expiresAt: c.expiresAt === undefined || c.expiresAt === null ? 0 : count(op, `${what}.expiresAt`, c.expiresAt),
  };
  if (out.payload.length > MAX_VALUE_BYTES / 3) capped(op, `${what}.payload`, textBytes(out.payload));
  return out;
}

/** An envelope (free text, at most {@link MAX_VALUE_BYTES}). */
export function envelope(op: string, what: string, v: unknown): string {
  const s = anyText(op, what, v);
  if (s.length > MAX_VALUE_BYTES / 3) capped(op, what, textBytes(s));
  return s;
}

export function newRequest(op: string, v: unknown, i: number): NewRequest {
  if (typeof v !== 'object' || v === null) throw invalidArgument(`${op}: requests[${i}] must be an object`);
  const r = v as NewRequest;
  if (!(r.payload instanceof Uint8Array)) throw invalidArgument(`${op}: requests[${i}].payload must be a Uint8Array`);
  const out = {
    id: text(op, `requests[${i}].id`, r.id),
    token: text(op, `requests[${i}].token`, r.token),
    queue: text(op, `requests[${i}].queue`, r.queue),
    deadline: count(op, `requests[${i}].deadline`, r.deadline),
    envelope: anyText(op, `requests[${i}].envelope`, r.envelope),
    payload: r.payload,
  };
  // Envelope and payload travel in the same statement: their sum is what has to fit.
  if (3 * out.envelope.length + out.payload.byteLength > MAX_VALUE_BYTES) {
    capped(op, `requests[${i}] (envelope + payload)`, textBytes(out.envelope) + out.payload.byteLength);
  }
  return out;
}

/** Batch statuses a batch may be settled into by its driver. */
const LEFTOVER_STATES = { expired: 3, cancelled: 4 } as const;

/** The settled state number of `how` (`expired` or `cancelled`). */
export function leftoverState(op: string, how: unknown): 3 | 4 {
  if (how !== 'expired' && how !== 'cancelled') throw invalidArgument(`${op}: how must be 'expired' or 'cancelled'`);
  return LEFTOVER_STATES[how];
}

/** An optional page cursor: absent, or an id. */
export function cursor(op: string, v: unknown): string | null {
  return v === undefined || v === null ? null : text(op, 'after', v);
}

/** A positive integer at most `max`. */
export function between(op: string, what: string, v: unknown, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
    throw invalidArgument(`${op}: ${what} must be an integer from ${min} to ${max}`);
  }
  return v;
}

/** Batch metadata: absent, null, or an object of at most 16 string values. */
export function batchMetadata(op: string, v: unknown): Record<string, string> | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'object' || Array.isArray(v)) throw invalidArgument(`${op}: metadata must be an object of strings`);
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > 16) throw invalidArgument(`${op}: metadata must have at most 16 keys`);
  for (const [k, x] of entries) {
    checkName(op, 'a metadata key', k);
    checkText(op, `metadata.${k}`, x);
  }
  return v as Record<string, string>;
}

/** Byte lines: an array of `Uint8Array`s. */
export function byteLines(op: string, what: string, v: unknown): Uint8Array[] {
  const xs = list<unknown>(op, what, v);
  xs.forEach((x, i) => {
    if (!(x instanceof Uint8Array)) throw invalidArgument(`${op}: ${what}[${i}] must be a Uint8Array`);
  });
  return xs as Uint8Array[];
}
