export { LEASE_DURATION_MS, RETRY_BASE_MS, RETRY_CAP_MS, KNOWN_QUEUES } from './constants.js';
export { retryBackoffMs } from './backoff.js';
export { JobQueue, type EnqueueOptions, type JobQueueOptions } from './job-queue.js';
export {
  DEFAULT_WORK_CONCURRENCY,
  type ManagedWorkerOptions,
  type WorkOptions,
  type WorkerHealth,
  type WorkerStopped,
} from './managed-workers.js';
export { DEFAULT_CLOSE_TIMEOUT_MS, METRIC_UNSERVED_ENQUEUES, type JobQueueOpenOptions } from './open-options.js';
export { MAX_CONCURRENCY } from './options.js';
export {
  defineJob,
  type JobDefinition,
  type JobDefinitionOptions,
  type StandardSchemaIssue,
  type StandardSchemaPathSegment,
  type StandardSchemaResult,
  type StandardSchemaV1,
  type TypedEnqueueOptions,
  type TypedHandler,
  type TypedJob,
} from './define-job.js';
export {
  batchHandler,
  DEFAULT_BATCH_SIZE,
  DEFAULT_BATCH_WAIT_MS,
  type BatchHandlerFunc,
  type BatchItem,
  type BatchOptions,
  type BatchOutcome,
} from './work-many.js';
export { Worker, type HandlerFunc, type HandlerContext, type WorkerOptions } from './worker.js';
export { MAX_PERSISTENT_FAILURES, type WorkerFailure } from './failure-watch.js';
export type { LeaseLostReason, WorkerEventListener, WorkerEventMap, WorkerEventName, WorkerEventSource } from './events.js';
export { leaderLeaseMs } from './maintenance.js';
export { StepRecorder, type StepWriter } from './step-recorder.js';
export { DeadLetterError, JobAbortedError, JobSnoozeError, MAX_SNOOZE_MS, type JobAbortCause } from './errors.js';
export { PROGRESS_INTERVAL_MS } from './progress.js';
export { DEFAULT_MAX_SNOOZES, MAX_PROGRESS_BYTES, type SnoozeResult } from '@q/store/jobs';
export { defaultLogger, silentLogger, stderrLogger, type Logger } from './logger.js';
export type { JobMetrics } from '@q/otel';
export type {
  EnqueueResult,
  Job,
  JobFlowNode,
  JobStatus,
  WaitForOptions,
  Step,
  StepStatus,
  JobPage,
  JobKeyMode,
  GroupLimit,
  GroupRunning,
  JobListFilter,
  InTransaction,
  TransactionClient,
  FlowCancelled,
  FlowDependency,
  FlowEdge,
  FlowInfo,
  FlowFailurePolicy,
  FlowNode,
  FlowJobNode,
  FlowRequestNode,
  FlowRequest,
  FlowParent,
  FlowResult,
  NewFlow,
} from '@q/store/jobs';
export { drizzleClient, FLOW_REQUEST_TYPE, FLOW_ROUTE_PREFIX } from '@q/store/jobs';
export { DEFAULT_SCHEDULE_TIMEZONE, scheduledFor, type ScheduleInfo, type ScheduleOptions } from './schedules.js';
export { Scheduler, SCHEDULER_MAX_IDLE_MS, type SchedulerOptions, type TickResult, type WorkerSchedulerOptions } from './scheduler.js';
