export {
  JobStore,
  JOBS_BACKLOG_METRIC,
  DEFAULT_MAX_RESUMES,
  ENQUEUE_CHUNK,
  COMPLETE_CHUNK,
  STATEMENT_TEXT_BUDGET,
  CALL_TEXT_LIMIT,
  type MaintenanceResult,
  type CompleteAndClaimResult,
} from './job-store.js';
export { MAINTENANCE_LEADERSHIP, type LeaderLease, type LeaderMaintenanceResult } from './leadership.js';
export type { MaintenanceFailure } from './ops/maintenance.js';
export type { FlowCancelled } from './sql/cancel-flow.js';
export { FlowStore } from './flow-store.js';
export type { JobStoreFromPoolOptions, JobStoreOpenOptions, JobStoreSchemaOptions } from './options.js';
export { JobListener, type JobListenerHandlers, type JobNotification } from './listener.js';
export { FINISHED_STATUSES, type WaitForOptions } from './finish-waiters.js';
export { encodeCursor, decodeCursor } from './cursor.js';
export { DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_SNOOZES, MAX_PROGRESS_BYTES, outcomeProblem, progressJson } from './validate.js';
export { ERROR_STACK_SEPARATOR, joinErrorStack, splitErrorText } from './error-text.js';
export { claimOrder } from './claim-order.js';
export { deadLetterRetry } from './dead-letter-retry.js';
export {
  JOB_STATUSES,
  type CancelOutcome,
  type ClaimOptions,
  type GroupLimit,
  type GroupRunning,
  type EnqueueResult,
  type FlowDependency,
  type FlowFailurePolicy,
  type FlowEdge,
  type FlowInfo,
  type FlowNode,
  type FlowJobNode,
  type FlowRequestNode,
  type FlowRequest,
  FLOW_REQUEST_TYPE,
  FLOW_ROUTE_PREFIX,
  type FlowParent,
  type FlowResult,
  FLOW_FAILURE_POLICIES,
  MAX_FLOW_NODES,
  type NewFlow,
  type Job,
  type JobFlowNode,
  type JobLease,
  type JobKeyMode,
  type JobListFilter,
  type JobOutcome,
  type JobPage,
  type JobStatus,
  type LeaseState,
  type LeasedJob,
  type NewJob,
  type ReapedJob,
  type SnoozeResult,
  type Step,
  type StepStatus,
} from './types.js';
export {
  MAX_DUE_PER_TICK,
  scheduleJobKey,
  type DueSchedule,
  type DueSchedules,
  type FireResult,
  type ScheduleFire,
  type ScheduleInput,
  type StoredSchedule,
} from './ops/schedules.js';

export { checkGroupOptions as checkClaimGroups } from './group-claims.js';
