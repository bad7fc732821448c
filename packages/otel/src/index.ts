export { INSTRUMENTATION_SCOPE, instrumentClient, instrumentPool, qTracer, withOperation } from './pool.js';
export {
  METRIC, jobMetrics, observeGauge, qMeter, quotaKeyClass, quotaMetrics, requestMetrics,
  type JobMetrics, type QuotaMetrics, type RequestMetrics,
} from './metrics.js';
export type { MeterProvider, Tracer, TracerProvider } from '@opentelemetry/api';
