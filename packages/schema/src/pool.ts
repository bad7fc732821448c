import pg from 'pg';
import { redactDsnString, redactSecretsOf, validateDsn } from './dsn.js';
import { QError, QErrorCode, invalidArgument } from './errors.js';

/**
 * Pool size used when `maxConns` is absent or not positive. Modest on purpose: Postgres allows
 * 100 connections by default, and q's hot paths are batched, so a worker at any concurrency
 * needs a few connections for claims and outcomes plus one per LISTEN, not one per handler.
 */
export const DEFAULT_MAX_CONNS = 10;

/**
 * How long a pooled connection may sit idle before it is closed (ms): an idle process gives its
 * backends back instead of holding `maxConns` of them forever.
 */
export const DEFAULT_IDLE_TIMEOUT_MS = 30_000;

/** Options of {@link openPool}. */
export interface PoolOptions {
  /** Cap on open connections. `<= 0` or absent: {@link DEFAULT_MAX_CONNS} (10). */
  maxConns?: number;
  /**
   * Close a connection after it has been idle this long (ms). `0`: never close idle connections.
   * Absent: {@link DEFAULT_IDLE_TIMEOUT_MS} (30 s).
   */
  idleTimeoutMillis?: number;
  /** `application_name` of every connection, so operators can find (and tests can cut) them. */
  applicationName?: string;
  /** Called for errors of idle connections (a terminated backend); they are otherwise dropped. */
  onIdleError?: (err: Error) => void;
  /** Called with the new pool before its first connection (e.g. `@q/otel`'s `instrumentPool`). */
  instrument?: (pool: pg.Pool) => void;
  /**
   * Turn JIT compilation off on every connection (`SET jit = off`, sent before its first
   * statement). q's statements are small, but their generic plans are costed from defaults that
   * grow with the table (a `LIMIT` of a parameter is taken as a tenth of the rows): on a server
   * with JIT, a claim over a backlog of a million jobs was compiled on every execution, about
   * 0.7 s a claim for a statement that runs in milliseconds. Not for connections shared with
   * other sessions' settings (a transaction pooler): there the SET would outlive this client.
   */
  jitOff?: boolean;
}

/**
 * Validates `dsn`, opens a `pg` pool of at most `maxConns` connections and pings it. Connections
 * idle for `idleTimeoutMillis` (default 30 s) are closed, and opened again on demand.
 * Errors carry the DSN with its password redacted; the pool is closed if the ping fails.
 */
export async function openPool(dsn: string, opts: PoolOptions = {}): Promise<pg.Pool> {
  validateDsn(dsn);
  const max = resolveMaxConns(opts.maxConns);
  const idleTimeoutMillis = resolveIdleTimeout(opts.idleTimeoutMillis);
  let pool: pg.Pool;
  try {
    pool = new pg.Pool({
      connectionString: dsn,
      max,
      idleTimeoutMillis,
      ...(opts.applicationName ? { application_name: opts.applicationName } : {}),
      ...(opts.jitOff === true ? { Client: JitOffClient } : {}),
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

/**
 * A client that turns JIT off once connected, before the pool hands it out (a `SET` sent from
 * the pool's `connect` event would run beside the first query). A failure (a server without JIT
 * settings) leaves JIT as the server has it.
 */
class JitOffClient extends pg.Client {}
// connect() is called with a callback by the pool and without one by a direct caller.
JitOffClient.prototype.connect = function connect(this: pg.Client, callback?: (err: Error | null, client?: pg.Client) => void) {
  const baseConnect = pg.Client.prototype.connect as (this: pg.Client) => Promise<unknown>;
  const ready: Promise<pg.Client> = baseConnect.call(this).then(() =>
    this.query('SET jit = off').then(
      () => this,
      () => this,
    ),
  );
  if (callback === undefined) return ready;
  ready.then(
    (client) => callback(null, client),
    (err: Error) => callback(err),
  );
  return undefined;
} as unknown as typeof pg.Client.prototype.connect;

/** Resolves the `maxConns` option: absent or `<= 0` means {@link DEFAULT_MAX_CONNS}. */
export function resolveMaxConns(maxConns: number | undefined): number {
  if (maxConns === undefined || maxConns === null) return DEFAULT_MAX_CONNS;
  if (typeof maxConns !== 'number' || Number.isNaN(maxConns) || !Number.isFinite(maxConns)) {
    throw invalidArgument('maxConns must be a finite number');
  }
  return maxConns <= 0 ? DEFAULT_MAX_CONNS : Math.floor(maxConns);
}

/** Resolves the `idleTimeoutMillis` option: absent means {@link DEFAULT_IDLE_TIMEOUT_MS}; `0` keeps idle connections. */
export function resolveIdleTimeout(ms: number | undefined): number {
  if (ms === undefined || ms === null) return DEFAULT_IDLE_TIMEOUT_MS;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw invalidArgument('idleTimeoutMillis must be a finite number >= 0');
  }
  return Math.floor(ms);
}

/** A `CONNECTION` error for a failed connect to `dsn`, with every credential redacted. */
export function connectionError(dsn: string, err: unknown): QError {
  const reason = redactSecretsOf(err instanceof Error ? err.message : String(err), dsn);
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
