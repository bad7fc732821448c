export { LEASE_DURATION_MS, RETRY_BASE_MS, RETRY_CAP_MS, KNOWN_QUEUES } from './constants.js';
export { retryBackoffMs } from './backoff.js';
export { JobQueue, type EnqueueOptions, type JobQueueOptions } from './job-queue.js';
export { Worker, type HandlerFunc, type HandlerContext, type WorkerOptions } from './worker.js';
export { StepRecorder, type StepWriter } from './step-recorder.js';
export { DeadLetterError, JobAbortedError, type JobAbortCause } from './errors.js';
export { silentLogger, type Logger } from './logger.js';
export type { JobMetrics } from '@q/otel';
export type { Job, JobStatus, Step, StepStatus, JobPage, JobListFilter } from '@q/store';
