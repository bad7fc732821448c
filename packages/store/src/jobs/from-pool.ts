import { QError, QErrorCode, invalidArgument, redactDsn } from '@q/schema';
import { databaseError } from '@q/schema/internal';
import type pg from 'pg';

/** Throws `INVALID_ARGUMENT` unless `pool` looks like a `pg.Pool` and `opts` is an options object. */
export function checkJobPool(pool: unknown, opts: unknown): asserts pool is pg.Pool {
  const p = pool as { query?: unknown; connect?: unknown } | null;
  if (typeof pool !== 'object' || p === null || typeof p.query !== 'function' || typeof p.connect !== 'function') {
    throw invalidArgument('JobStore.fromPool: pool must be a pg.Pool');
  }
  if (typeof opts !== 'object' || opts === null) throw invalidArgument('JobStore.fromPool: options must be an object');
  const migrate = (opts as { migrate?: unknown }).migrate;
  if (migrate !== undefined && typeof migrate !== 'boolean') throw invalidArgument('JobStore.fromPool: migrate must be a boolean');
}

/**
 * Connection settings for the store's LISTEN connections: the pool's own (a `pg.Pool` keeps its
 * options, the password as a hidden property, which a spread would drop).
 */
export function listenerConnection(pool: pg.Pool): pg.ClientConfig {
  const options = (pool as { options?: pg.PoolConfig }).options ?? {};
  const { password } = options;
  return { ...options, ...(password !== undefined ? { password } : {}) };
}

/**
 * A failed write through the caller's transaction as a `QError` (the savepoint is already rolled
 * back): the shared {@link databaseError} mapping, except that any other integrity violation
 * (class 23: a check or foreign key the caller's rows broke) is `INVALID_ARGUMENT` too, since
 * retrying the same transaction cannot help. Postgres' DETAIL, which can quote a payload, is never kept.
 */
export function transactionWriteError(err: unknown): QError {
  const code = (err as { code?: unknown } | null)?.code;
  if (!(err instanceof QError) && typeof code === 'string' && code.startsWith('23') && code !== '23505') {
    const headline = (err instanceof Error ? err.message : String(err)).split(':')[0]?.trim() ?? '';
    return new QError(QErrorCode.INVALID_ARGUMENT, `enqueue: ${redactDsn(headline)} (SQLSTATE ${code})`, { cause: err });
  }
  return databaseError('enqueue', err);
}

/** A failure of `JobStore.fromPool` (migrating, reading the schema) as a `QError`. */
export function poolError(err: unknown): QError {
  return databaseError('JobStore.fromPool', err);
}
