import type { ConnectionPlacement } from '@q/schema';
import type { MeterProvider, TracerProvider } from '@opentelemetry/api';

/** Options of `Store.open` and `JobStore.open`. */
export interface OpenOptions extends ConnectionPlacement {
  /** Cap on pooled connections, also kept idle for reuse. `<= 0` or absent: 32. */
  maxConns?: number;
  /** Records a span per operation and per statement. Absent: no spans, no cost. */
  tracerProvider?: TracerProvider;
  /** Records metrics. Absent: the global meter provider (a no-op until an app registers an SDK). */
  meterProvider?: MeterProvider;
  /** Apply pending migrations of the store's module on open. Default `true`. */
  migrate?: boolean;
  /** `application_name` of the pool's connections. Default `q-store` / `q-jobs`. */
  applicationName?: string;
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
}
