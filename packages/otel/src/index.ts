export {
  INSTRUMENTATION_SCOPE,
  instrumentClient,
  instrumentPool,
  qTracer,
  recordError,
  scrubError,
  withConsumerSpan,
  withOperation,
} from './pool.js';
export { recordSpan, untraced } from './untraced.js';
export { contextFromTraceparent, currentTraceparent, formatTraceparent, linksFromTraceparent, parseTraceparent } from './propagation.js';
export {
  DEPRECATED_METRIC,
  JOB_DURATION_BUCKETS_S,
  METRIC,
  flowMetrics,
  jobGroupMetrics,
  jobMetrics,
  observeBacklog,
  observeGauge,
  qMeter,
  quotaKeyClass,
  quotaMetrics,
  requestMetrics,
  type BacklogSource,
  type FlowMetrics,
  type JobGroupMetrics,
  type JobMetrics,
  type JobMetricsOptions,
  type QuotaMetrics,
  type RequestMetrics,
} from './metrics.js';
export type { Link, MeterProvider, Tracer, TracerProvider } from '@opentelemetry/api';
export { errorFields, firstLine, logsAt, silentLogger, stderrLogger, type Logger, type StderrLoggerOptions } from './logger.js';
