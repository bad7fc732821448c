import type pg from 'pg';

/** What the statements need: a pool or a checked-out client (for a transaction). */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
}
