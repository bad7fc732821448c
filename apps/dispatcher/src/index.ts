// @q/dispatcher: the reference async inference dispatcher, usable as a library (tests, embedding).
export { loadConfig, readConfigFile, OVERRIDABLE, type LoadOptions } from './config/load.js';
export {
  CONFIG_SCHEMA,
  TOP_DEFAULTS,
  type ApiKeyConfig,
  type BatchApiConfig,
  type DispatcherConfig,
  type GateConfig,
  type QueueConfig,
} from './config/schema.js';
export { ApiKeys, hashApiKey } from './batch/api-keys.js';
export { BATCH_ENDPOINTS } from './batch/line-check.js';
export * from './formats.js';
export { InferenceClient, type AttemptOutcome, type ErrorCategory, type InferenceClientOptions } from './http/client.js';
export { buildHeaders, joinUrl, type HeaderInput } from './http/headers.js';
export { parseRetryAfter, retryBackoffSeconds, type BackoffInput } from './http/retry.js';
export { silentLogger, type Logger } from './logger.js';
export { DispatcherMetrics, type GateReason, type Tallies } from './metrics.js';
export { CancelBatcher } from './pipeline/cancel-batcher.js';
export { createHandler, DEFAULT_ROUTE, type HandlerDeps } from './pipeline/handler.js';
export type { CancelSource, Key, Outcome, QueuedRequest, QuotaPort, Release } from './pipeline/ports.js';
export { DEFAULT_QUEUE, popResults, submitRequests, type PoppedResult, type SubmitTarget } from './client/producer.js';
export { startEndpoint, type Endpoint, type EndpointSources } from './service/http-endpoints.js';
export {
  completionBody,
  simulated,
  startInferenceServer,
  type Action,
  type Behaviour,
  type Call,
  type InferenceServer,
  type InferenceServerOptions,
  type SimulationOptions,
} from './sim/server.js';
export { formatStatus, queueStatus, EXPIRING_WINDOWS, type QueueStatus } from './status.js';
export { Dispatcher, dispatcherServiceName, type DispatcherOptions } from './service/dispatcher.js';
export { formatSummary, runDemo, type DemoOptions, type DemoSummary } from './demo.js';
