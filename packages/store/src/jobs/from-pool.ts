import { QError, QErrorCode, invalidArgument, redactDsn } from '@q/schema';
import type pg from 'pg';

/** Throws `INVALID_ARGUMENT` unless `pool` looks like a `pg.Pool` and `opts` is an options object. */
export function checkJobPool(pool: unknown, opts: unknown): asserts pool is pg.Pool {
  const p = pool as { query?: unknown; connect?: unknown } | null;
  if (typeof pool !== 'object' || p === null || typeof p.query !== 'function' || typeof p.connect !== 'function') {
    throw invalidArgument('JobStore.fromPool needs a pg.Pool');
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
 * back): QErrors pass; a value Postgres refused (class 22, 23) is `INVALID_ARGUMENT`; anything else
 * `CONNECTION`. Only Postgres' message is kept, never its DETAIL (which can quote a payload).
 */
export function transactionWriteError(err: unknown): QError {
  if (err instanceof QError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const reason = redactDsn(err instanceof Error ? err.message : String(err));
  if (typeof code === 'string' && (code.startsWith('22') || code.startsWith('23'))) {
    return new QError(QErrorCode.INVALID_ARGUMENT, `enqueue: ${reason}`, { cause: err });
  }
  return new QError(QErrorCode.CONNECTION, `enqueue failed: ${reason}`, { cause: err });
}

/** A failure of `JobStore.fromPool` (migrating, reading the schema) as a `QError` (`CONNECTION`). */
export function poolError(err: unknown): QError {
  if (err instanceof QError) return err;
  const reason = redactDsn(err instanceof Error ? err.message : String(err));
  return new QError(QErrorCode.CONNECTION, `JobStore.fromPool failed: ${reason}`, { cause: err });
}
