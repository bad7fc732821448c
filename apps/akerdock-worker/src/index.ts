// @q/akerdock-worker: the reference job worker — handlers, admin API, CLI, process wiring.
export {
  DEFAULT_PURGE_CRON,
  KNOWN_QUEUES,
  PURGE_SCHEDULE_NAME,
  USAGE,
  intervalCron,
  isLoopback,
  parseConfig,
  type ParsedConfig,
  type WorkerConfig,
} from './config.js';
export { parseDuration } from './duration.js';
export { childLogger, createLogger, silentLogger, usePrettyLogs, type Logger, type LoggerOptions } from './logger.js';
export { ATTEMPT_HEADER, IDEMPOTENCY_HEADER, SIGNATURE_HEADER, signWebhook, verifyWebhook } from './signing.js';
export * from './handlers/index.js';
export { buildAdminServer, type AdminServerOptions } from './api/server.js';
export { jobToJson, type JobJson } from './api/job-json.js';
export { scheduleToJson, type ScheduleJson } from './api/schedule-json.js';
export { openApiDocument } from './api/openapi.js';
export { AdminClient, ApiCallError, type JobPage, type RetryAnswer } from './cli/client.js';
export { CLI_USAGE, COMMAND_USAGE, runCli, type CliIo } from './cli/q-jobs.js';
export { startWorkerApp, type WorkerApp, type WorkerAppOptions } from './app.js';
// The job packages' types the app names (job-types.ts), for code built on the app.
export type * from './job-types.js';
