import pg from 'pg';
import { redactDsn, redactDsnString, validateDsn } from './dsn.js';
import { QError, QErrorCode, invalidArgument } from './errors.js';

/** Pool size used when `maxConns` is absent or not positive. */
export const DEFAULT_MAX_CONNS = 32;

/** Options of {@link openPool}. */
export interface PoolOptions {
  /** Cap on open connections; that many are also kept idle for reuse. `<= 0` or absent: 32. */
  maxConns?: number;
  /** `application_name` of every connection, so operators can find (and tests can cut) them. */
  applicationName?: string;
  /** Called for errors of idle connections (a terminated backend); they are otherwise dropped. */
  onIdleError?: (err: Error) => void;
  /** Called with the new pool before its first connection (e.g. `@q/otel`'s `instrumentPool`). */
  instrument?: (pool: pg.Pool) => void;
}

/**
 * Validates `dsn`, opens a `pg` pool and pings it. Idle connections are kept (no idle timeout).
 * Errors carry the DSN with its password redacted; the pool is closed if the ping fails.
 */
export async function openPool(dsn: string, opts: PoolOptions = {}): Promise<pg.Pool> {
  validateDsn(dsn);
  const max = resolveMaxConns(opts.maxConns);
  let pool: pg.Pool;
  try {
    pool = new pg.Pool({
      connectionString: dsn,
      max,
      idleTimeoutMillis: 0,
      ...(opts.applicationName ? { application_name: opts.applicationName } : {}),
    });
  } catch (err) {
    throw connectionError(dsn, err);
  }
  // Without a listener, a backend terminated while its connection is idle crashes the process.
  pool.on('error', (err) => opts.onIdleError?.(err));
  opts.instrument?.(pool);
  try {
    await pool.query('SELECT 1');
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw connectionError(dsn, err);
  }
  return pool;
}

/** Resolves the `maxConns` option: absent or `<= 0` means {@link DEFAULT_MAX_CONNS}. */
export function resolveMaxConns(maxConns: number | undefined): number {
  if (maxConns === undefined || maxConns === null) return DEFAULT_MAX_CONNS;
  if (typeof maxConns !== 'number' || Number.isNaN(maxConns) || !Number.isFinite(maxConns)) {
    throw invalidArgument('maxConns must be a finite number');
  }
  return maxConns <= 0 ? DEFAULT_MAX_CONNS : Math.floor(maxConns);
}

/** A `CONNECTION` error for a failed connect to `dsn`, with every credential redacted. */
export function connectionError(dsn: string, err: unknown): QError {
  const reason = redactDsn(err instanceof Error ? err.message : String(err));
  return new QError(QErrorCode.CONNECTION, `cannot connect to ${redactDsnString(dsn)}: ${reason}`, { cause: err });
}

/**
 * Runs `fn` in a transaction on one pooled connection: COMMIT when it resolves, ROLLBACK when it
 * throws (the error is rethrown). A connection that broke meanwhile, or cannot even roll back, is
 * destroyed, not given back to the pool; its 'error' event is handled, never left to crash the process.
 */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A checked-out client has no listener of the pool's: without this one, a backend terminated
  // between two statements (failover, pg_terminate_backend) is an unhandled 'error' event that
  // kills the process. The next statement then rejects, and the client is destroyed below.
  let broken: Error | undefined;
  const onError = (err: Error): void => {
    broken = err;
  };
  client.on('error', onError);
  try {
    try {
      await client.query('BEGIN');
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch((e: unknown) => {
        broken ??= e instanceof Error ? e : new Error(String(e));
      });
      throw err;
    }
  } finally {
    client.removeListener('error', onError);
    client.release(broken ?? false);
  }
}
