import type { ConnectionPlacement } from '@q/schema';
import type { MeterProvider, TracerProvider } from '@opentelemetry/api';

/** Options of `Store.open` and `JobStore.open`. */
/** `pooler` / `listenDsn`: see `ConnectionPlacement` of `@q/schema`. */
export interface OpenOptions extends ConnectionPlacement {
  /**
   * Cap on pooled connections. `<= 0` or absent: 10. Connections idle for 30 s are closed, so an
   * idle process holds few (see `DEFAULT_MAX_CONNS` and `DEFAULT_IDLE_TIMEOUT_MS` of `@q/schema`).
   */
  maxConns?: number;
  /** Close a pooled connection after it has been idle this long (ms); `0` keeps idle connections. Default 30 000. */
  idleTimeoutMillis?: number;
  /** Records a span per operation and per statement. Absent: no spans, no cost. */
  tracerProvider?: TracerProvider;
  /** Records metrics. Absent: the global meter provider (a no-op until an app registers an SDK). */
  meterProvider?: MeterProvider;
  /** Apply pending migrations of the store's module on open. Default `true`. */
  migrate?: boolean;
  /** `application_name` of the pool's connections. Default `q-store` / `q-jobs`. */
  applicationName?: string;
  /**
   * The schema holding the store's tables, created if missing (`CREATE SCHEMA IF NOT EXISTS`):
   * every statement names it, so no `search_path` setting is needed. Absent: the connection's
   * current schema at open.
   */
  schema?: string;
}

/** Options of `Store.fromPool` and `JobStore.fromPool` (the pool's own settings stay as they are). */
export interface FromPoolOptions extends ConnectionPlacement {
  /** Records a span per operation. Statement spans need `instrumentPool` (`@q/otel`) on the pool. */
  tracerProvider?: TracerProvider;
  /** Records metrics. Absent: the global meter provider. */
  meterProvider?: MeterProvider;
  /** Apply pending migrations of the store's module through the pool. Default `true`. */
  migrate?: boolean;
  /** `application_name` of the job store's LISTEN connections. Default `q-jobs`. */
  applicationName?: string;
  /**
   * The schema holding the store's tables, created if missing when migrating (`CREATE SCHEMA IF NOT EXISTS`):
   * every statement names it, so no `search_path` setting is needed. Absent: the connection's
   * current schema at open (read once).
   */
  schema?: string;
}
