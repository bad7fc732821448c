import { invalidArgument } from './errors.js';

/**
 * Where a store's connections go, shared by the options of every store's `open()`/`fromPool()`
 * (`JobStore`, `Store`, `QuotaStore`), which extend it.
 */
export interface ConnectionPlacement {
  /**
   * `'transaction'`: the DSN points at a transaction pooler (PgBouncer `pool_mode = transaction`,
   * managed poolers) that does not track prepared statements. Statements are sent unnamed and no
   * session state is kept across statements; the job listener's LISTEN only runs on
   * {@link ConnectionPlacement.listenDsn} (otherwise workers poll). Absent: a direct connection
   * or a session pooler.
   */
  pooler?: 'transaction';
  /**
   * A direct (or session-pooled) DSN for the job listener's LISTEN connection, which a
   * transaction pooler cannot carry. Absent in pooler mode: no LISTEN, idle workers poll.
   */
  listenDsn?: string;
}

/** Checks the {@link ConnectionPlacement} fields of `opts` (of `op`). Throws `INVALID_ARGUMENT`. */
export function checkPlacement(op: string, opts: ConnectionPlacement): void {
  if (opts.pooler !== undefined && opts.pooler !== 'transaction') {
    throw invalidArgument(`${op}: pooler must be 'transaction' or absent`);
  }
  if (opts.listenDsn !== undefined && (typeof opts.listenDsn !== 'string' || opts.listenDsn === '')) {
    throw invalidArgument(`${op}: listenDsn must be a non-empty DSN string`);
  }
}

/** Whether statements are sent named under `placement` (the `named` option of a `StatementScope`). */
export function namedStatements(placement: ConnectionPlacement): boolean {
  return placement.pooler !== 'transaction';
}
