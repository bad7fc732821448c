// The one place the app names the job packages' types (docs/design/api.md#job-queue).
import type { JobQueue } from '@q/job-worker';

export type {
  EnqueueOptions,
  FlowInfo,
  ScheduleInfo,
  ScheduleOptions,
  HandlerContext,
  HandlerFunc,
  Job,
  JobStatus,
  Step,
  StepRecorder,
} from '@q/job-worker';

/** The part of `JobQueue` the admin API and the purge schedule use. */
export type JobQueueLike = Pick<
  JobQueue,
  | 'enqueue'
  | 'get'
  | 'list'
  | 'cancel'
  | 'retryDeadLetter'
  | 'forgetDeadLetter'
  | 'purgeFinished'
  | 'schedule'
  | 'unschedule'
  | 'schedules'
  | 'pauseSchedule'
  | 'resumeSchedule'
  | 'runningGroups'
  | 'getFlow'
  | 'cancelFlow'
  | 'retryFlow'
>;
