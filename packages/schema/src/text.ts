import { invalidArgument } from './errors.js';

/** Longest identifier (id, token, queue, owner, route, key) accepted, in UTF-8 bytes: it must fit a btree entry. */
export const MAX_NAME_BYTES = 2048;

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why `s` cannot be stored verbatim in a Postgres `text` column, or `undefined` if it can:
 * Postgres text holds no NUL character, and a lone UTF-16 surrogate has no UTF-8 form (it would
 * come back as U+FFFD, not as written).
 */
export function unstorableText(s: string): string | undefined {
  if (s.includes('\u0000')) return 'contains a NUL character';
  if (LONE_SURROGATE.test(s)) return 'contains a lone UTF-16 surrogate';
  return undefined;
}

/**
 * Checks an identifier-like argument: a non-empty string, storable verbatim, at most
 * {@link MAX_NAME_BYTES} UTF-8 bytes. Throws `INVALID_ARGUMENT` naming `what` (never the value).
 */
export function checkName(op: string, what: string, v: unknown, opts: { allowEmpty?: boolean } = {}): string {
  if (typeof v !== 'string' || (v.length === 0 && !opts.allowEmpty)) {
    throw invalidArgument(`${op}: ${what} must be a ${opts.allowEmpty ? '' : 'non-empty '}string`);
  }
  const bad = unstorableText(v);
  if (bad) throw invalidArgument(`${op}: ${what} ${bad}`);
  if (v.length > MAX_NAME_BYTES / 3 && Buffer.byteLength(v, 'utf8') > MAX_NAME_BYTES) {
    throw invalidArgument(`${op}: ${what} is longer than ${MAX_NAME_BYTES} bytes`);
  }
  return v;
}

/** Checks free text (envelopes, result payloads, error messages): a string storable verbatim. */
export function checkText(op: string, what: string, v: unknown): string {
  if (typeof v !== 'string') throw invalidArgument(`${op}: ${what} must be a string`);
  const bad = unstorableText(v);
  if (bad) throw invalidArgument(`${op}: ${what} ${bad}`);
  return v;
}
