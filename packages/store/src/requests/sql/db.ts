import type { Queryable } from '@q/schema';

/** What a statement runs on: the pool (one round trip) or a client inside a transaction. */
export type Db = Queryable;

/** A `bigint`/`numeric` column as a number (`pg` returns them as strings). */
export function num(v: string | number): number {
  return typeof v === 'number' ? v : Number(v);
}
