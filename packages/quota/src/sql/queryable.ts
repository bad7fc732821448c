import type pg from 'pg';

/** What a statement needs to run: a pool or one checked-out client (inside a transaction). */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
}

/** The database clock in milliseconds, as every quota statement reads it. */
export const DB_NOW_MS = '(extract(epoch FROM clock_timestamp()) * 1000)::bigint';
