import type { StoreConnectionOptions, StoreOpenOptions } from '@q/schema';

/** Options of {@link QuotaStore.fromPool}: telemetry (spans `q.quota.<op>`, grant and refusal counters) and where the tables are. */
export type FromPoolOptions = StoreConnectionOptions;

/** Options of {@link QuotaStore.open} (application name `q-quota` unless given; migrates the `quota` module). */
export type OpenOptions = StoreOpenOptions;

/** Telemetry options of {@link QuotaStore.fromPool}. */
export type TelemetryOptions = Pick<OpenOptions, 'tracerProvider' | 'meterProvider'>;
