import type { MeterProvider, TracerProvider } from '@opentelemetry/api';
import { validateDsn } from './dsn.js';
import { QError, invalidArgument } from './errors.js';

/**
 * Where a store's connections go, shared by the options of every store's `open()`/`fromPool()`
 * (`JobStore`, `RequestStore`, `QuotaStore`), which extend it.
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

/**
 * The options every store's `fromPool()` and `open()` take (`RequestStore`, `JobStore`, `QuotaStore`):
 * where its connections go, where its tables are, and its telemetry.
 */
export interface StoreConnectionOptions extends ConnectionPlacement {
  /**
   * Records a span per operation (`q.<module>.<op>`) and per statement. Absent: no spans, no
   * cost. On a pool you own (`fromPool`), statement spans need `instrumentPool` of `@q/otel` on it.
   */
  tracerProvider?: TracerProvider;
  /** Records the store's metrics. Absent: the global meter provider (a no-op until an app registers an SDK). */
  meterProvider?: MeterProvider;
  /**
   * The schema holding the store's tables, created if missing when migrating (`CREATE SCHEMA IF
   * NOT EXISTS`): every statement names it, so no `search_path` setting is needed. Absent: the
   * connection's current schema at open (read once).
   */
  schema?: string;
}

/** The options of a store's `open()`: {@link StoreConnectionOptions} and the pool it opens (see `openPool`). */
export interface StoreOpenOptions extends StoreConnectionOptions {
  /**
   * Cap on pooled connections. `<= 0` or absent: `DEFAULT_MAX_CONNS` (10). Connections idle for
   * `DEFAULT_IDLE_TIMEOUT_MS` (30 s) are closed, so an idle process holds few.
   */
  maxConns?: number;
  /** Close a pooled connection after it has been idle this long (ms); `0` keeps idle connections. Default 30 000. */
  idleTimeoutMillis?: number;
  /** Apply pending migrations of the store's module on open. Default `true`. */
  migrate?: boolean;
  /** `application_name` of the store's connections. Default: the store's (`q-store`, `q-jobs`, `q-quota`). */
  applicationName?: string;
}

/** Checks the {@link ConnectionPlacement} fields of `opts` (of `op`). Throws `INVALID_ARGUMENT`. */
export function checkPlacement(op: string, opts: ConnectionPlacement): void {
  if (opts.pooler !== undefined && opts.pooler !== 'transaction') {
    throw invalidArgument(`${op}: pooler must be 'transaction' or absent`);
  }
  if (opts.listenDsn !== undefined && (typeof opts.listenDsn !== 'string' || opts.listenDsn === '')) {
    throw invalidArgument(`${op}: listenDsn must be a non-empty DSN string`);
  }
  // Checked as the main DSN is (UNSUPPORTED_DSN, nothing of it shown): it is connected to later,
  // by the listener, whose every reconnect would otherwise report what the server makes of it.
  if (opts.listenDsn !== undefined) {
    try {
      validateDsn(opts.listenDsn);
    } catch (err) {
      throw err instanceof QError ? new QError(err.code, `${op}: listenDsn: ${err.message}`) : err;
    }
  }
}

/** Whether statements are sent named under `placement` (the `named` option of a `StatementScope`). */
export function namedStatements(placement: ConnectionPlacement): boolean {
  return placement.pooler !== 'transaction';
}
