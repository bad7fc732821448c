import type pg from 'pg';

/** What a statement runs on: the pool (one round trip) or a client inside a transaction. */
export type Db = Pick<pg.Pool, 'query'> | pg.PoolClient;

/** A named, parameterised statement: prepared once per connection by `pg`. */
export interface Statement {
  readonly name: string;
  readonly text: string;
}

/** Runs `stmt` with `values`. */
export function run<R extends pg.QueryResultRow>(db: Db, stmt: Statement, values: unknown[]): Promise<pg.QueryResult<R>> {
  return db.query<R>({ name: stmt.name, text: stmt.text, values });
}

/** A `bigint`/`numeric` column as a number (`pg` returns them as strings). */
export function num(v: string | number): number {
  return typeof v === 'number' ? v : Number(v);
}
