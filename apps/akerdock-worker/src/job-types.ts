// Single place the app names the job packages' types, so handlers read the CONTRACT §5 shapes.
// (Stand-ins until @q/store jobs and @q/job-worker land; replaced by re-exports then.)

/** CONTRACT §5 `JobStatus`. */
export type JobStatus = 'scheduled' | 'queued' | 'leased' | 'running' | 'retry_wait' | 'succeeded' | 'cancelled' | 'dead_letter';

/** CONTRACT §5 step of a job's timeline. */
export interface Step {
  name: string;
  status: string;
  message?: string;
  started_at?: string;
  finished_at?: string;
}

/** CONTRACT §5 `Job`. */
export interface Job {
  id: number; uuid: string; queue: string; type: string; payload: unknown; status: JobStatus;
  priority: number; runAt: Date; attempt: number; maxAttempts: number; idempotencyKey: string | null;
  lockKey: string | null; leasedBy: string | null; leaseExpiresAt: Date | null; lastError: string | null;
  steps: Step[]; result: unknown; retryOfId: number | null; teamId: number | null; resourceId: number | null;
  resumeCount: number; createdAt: Date; updatedAt: Date; finishedAt: Date | null; deadLetteredAt: Date | null;
}

/** CONTRACT §5 `StepRecorder`. */
export interface StepRecorder {
  start(name: string): Promise<void>;
  succeed(message?: string): Promise<void>;
  fail(message?: string): Promise<void>;
  skip(name: string, message: string): Promise<void>;
  flush(): Promise<void>;
}

/** CONTRACT §5 `HandlerFunc`. */
export type HandlerFunc = (job: Job, ctx: { signal: AbortSignal; steps: StepRecorder }) => Promise<unknown>;

/** CONTRACT §5 `EnqueueOptions`. */
export interface EnqueueOptions {
  queue?: string; type: string; payload?: unknown; priority?: number; runAt?: Date; maxAttempts?: number;
  idempotencyKey?: string; lockKey?: string; teamId?: number; resourceId?: number; retryOfId?: number;
}

/** The part of CONTRACT §5 `JobQueue` the admin API and the scheduler use. */
export interface JobQueueLike {
  enqueue(opts: EnqueueOptions): Promise<Job>;
  get(uuid: string): Promise<Job | null>;
  list(filter: { status?: JobStatus; queue?: string; type?: string; teamId?: number; cursor?: string; limit?: number }):
    Promise<{ jobs: Job[]; nextCursor: string | null }>;
  cancel(uuid: string): Promise<boolean>;
  retryDeadLetter(uuid: string, opts?: { idempotencyKey?: string }): Promise<Job>;
  forgetDeadLetter(uuid: string): Promise<boolean>;
  purgeFinished(olderThanMs: number): Promise<number>;
}
