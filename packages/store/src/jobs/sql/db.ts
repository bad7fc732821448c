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

/**
 * A statement's placeholders by name: the k-th of `order` is `$(first + k)`. A statement's
 * parameter order is written once, as `order`, and its text names parameters, not positions.
 */
export function placeholders<K extends string>(first: number, order: readonly K[]): Record<K, string> {
  const out = {} as Record<K, string>;
  order.forEach((name, k) => {
    out[name] = `$${first + k}`;
  });
  return out;
}

/**
 * A parameter the planner cannot see into: `(SELECT $n::type)`, an init plan evaluated once per
 * execution.
 *
 * Why: a prepared statement is planned for its values (a custom plan) on each of its first five
 * executions; after that PostgreSQL switches to one plan for any values (the generic plan) only
 * if that plan's estimated cost is no higher than the custom plans' average. Where a value drives
 * an estimate — a constant array's length for `unnest`, a constant `LIMIT` — the custom plans
 * look cheaper, so the statement is planned again on every execution. For the claim that was
 * about 0.5 ms of a 1 ms round trip (a waiting job's start was late by it), and for a worker's
 * complete-and-claim round of a few hundred outcomes about 1.5 ms. Behind this wrapper the value
 * drives no estimate in either kind of plan, the costs are equal, and the generic plan (planned
 * once per connection) wins. Only for values whose plans must not depend on them: the statements
 * that use it are written so that their one good plan needs no value (every row lookup is by
 * primary key or a queue's dequeue index).
 */
export function opaque(param: string, type: string): string {
  return `(SELECT ${param}::${type})`;
}
