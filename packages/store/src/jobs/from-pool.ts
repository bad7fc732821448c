import { QError, QErrorCode, redactDsn } from '@q/schema';
import { databaseError } from '@q/schema/internal';
import type pg from 'pg';

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
