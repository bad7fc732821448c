import type { ConnectionPlacement } from '@q/schema';
import type { MeterProvider, TracerProvider } from '@opentelemetry/api';

/** Options of {@link QuotaStore.open} (`pooler`/`listenDsn`: see `ConnectionPlacement` of `@q/schema`). */
export interface OpenOptions extends ConnectionPlacement {
  /** Cap on pooled connections, also kept idle for reuse. `<= 0` or absent: 32. */
  maxConns?: number;
  /** Records a span per operation (`q.quota.<op>`) and per statement. Absent: no spans, no cost. */
  tracerProvider?: TracerProvider;
  /** Records grant and refusal counters. Absent: the global meter provider (a no-op until an app registers an SDK). */
  meterProvider?: MeterProvider;
  /** Apply pending migrations of the `quota` module on open. Default `true`. */
  migrate?: boolean;
  /** `application_name` of the pool's connections. Default `q-quota`. */
  applicationName?: string;
}

/** Telemetry options of {@link QuotaStore.fromPool}. */
export type TelemetryOptions = Pick<OpenOptions, 'tracerProvider' | 'meterProvider'>;
