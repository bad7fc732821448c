import type { ConnectionPlacement } from '@q/schema';
import type { MeterProvider, TracerProvider } from '@opentelemetry/api';

/** Options of {@link QuotaStore.fromPool}: telemetry and where the tables are. */
export interface FromPoolOptions extends ConnectionPlacement {
  /** Records a span per operation (`q.quota.<op>`) and per statement. Absent: no spans, no cost. */
  tracerProvider?: TracerProvider;
  /** Records grant and refusal counters. Absent: the global meter provider (a no-op until an app registers an SDK). */
  meterProvider?: MeterProvider;
  /**
   * The schema holding the quota tables (created if missing when migrating): every statement
   * names it, so no `search_path` setting is needed. Absent: the connection's current schema.
   */
  schema?: string;
}

/** Options of {@link QuotaStore.open}. */
export interface OpenOptions extends FromPoolOptions {
  /**
   * Cap on pooled connections. `<= 0` or absent: 10. Connections idle for 30 s are closed, so an
   * idle process holds few.
   */
  maxConns?: number;
  /** Close a pooled connection after it has been idle this long (ms); `0` keeps idle connections. Default 30 000. */
  idleTimeoutMillis?: number;
  /** Apply pending migrations of the `quota` module on open. Default `true`. */
  migrate?: boolean;
  /** `application_name` of the pool's connections. Default `q-quota`. */
  applicationName?: string;
}

/** Telemetry options of {@link QuotaStore.fromPool}. */
export type TelemetryOptions = Pick<OpenOptions, 'tracerProvider' | 'meterProvider'>;
