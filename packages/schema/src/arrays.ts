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
