import type pg from 'pg';

/** What the statements need: a pool or a checked-out client (for a transaction). */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
}

/**
 * Longest queue name a `q:<queue>` notification carries, in bytes: pg_notify refuses payloads of
 * 8,000 bytes or more. Statements skip the notification of a longer (legacy) queue name rather
 * than fail: its workers still find the job by polling.
 */
export const MAX_NOTIFY_QUEUE_BYTES = 7_990;
