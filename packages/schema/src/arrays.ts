/**
 * `a[i]`, for an index the caller knows is in range (a position taken from the same array, a
 * chunk boundary). Out of range is a bug in q, reported as such instead of an `undefined` that
 * would surface far from its cause.
 */
export function at<T>(a: readonly T[], i: number): T {
  const v = a[i];
  if (v === undefined && !(i in a)) throw new RangeError(`index ${i} outside an array of ${a.length}`);
  return v as T;
}

/** The first row of a statement that always returns one (an aggregate, `RETURNING` of one insert). */
export function onlyRow<T>(rows: readonly T[], what: string): T {
  const r = rows[0];
  if (r === undefined) throw new Error(`${what}: the statement returned no row`);
  return r;
}

/**
 * One column of a multi-array `unnest($1::…[], $2::…[], …)` as a statement parameter: `null` when
 * every value is null. `unnest` pads a shorter array, and a NULL one, with NULLs up to the longest,
 * so the rows are the same; but an array of N NULLs is text the driver formats element by element
 * and the server parses again, and optional columns (no idempotency key, no lock key, no error)
 * are most often all null. Only for a column of an `unnest` that has another, full-length array.
 */
export function unnestColumn<T>(values: readonly (T | null)[]): readonly (T | null)[] | null {
  for (const v of values) if (v !== null && v !== undefined) return values;
  return null;
}

/**
 * `values` as a Postgres array literal, for values whose text never needs quoting: integers,
 * UUIDs, enum labels, each checked before it gets here. One `join` instead of the driver's
 * formatting, which quotes and escapes every element, a measurable share of a worker's CPU
 * for the id and token columns of every completion.
 */
export function plainArrayLiteral(values: readonly (string | number)[]): string {
  return `{${values.join(',')}}`;
}

const NEEDS_ESCAPE = /[\\"]/g;

/**
 * `values` as a Postgres `text[]` literal: every element quoted (so `NULL`, braces, commas and
 * white space stay text), `\` and `"` escaped, a JS null as SQL NULL. The same literal the driver
 * builds, in one `join` and one escaping pass per element, instead of growing one string
 * element by element.
 */
export function textArrayLiteral(values: readonly (string | null)[]): string {
  const parts = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    parts[i] = v === null || v === undefined ? 'NULL' : `"${v.replace(NEEDS_ESCAPE, '\\$&')}"`;
  }
  return `{${parts.join(',')}}`;
}
