import type { Job, JobStatus, LeasedJob, Step } from './types.js';

const COLUMNS = [
  'id',
  'uuid',
  'queue',
  'job_type',
  'payload',
  'status',
  'priority',
  'run_at',
  'attempt',
  'max_attempts',
  'idempotency_key',
  'lock_key',
  'leased_by',
  'lease_expires_at',
  'cancel_requested_at',
  'last_error',
  'steps',
  'result',
  'retry_of_id',
  'team_id',
  'resource_id',
  'resume_count',
  'created_at',
  'updated_at',
  'finished_at',
  'dead_lettered_at',
] as const;

/** How many columns {@link jobColumns} lists. */
export const JOB_COLUMN_COUNT = COLUMNS.length;

/** The job columns every statement returns, qualified by `alias` (a constant, never input). */
export function jobColumns(alias: string): string {
  return COLUMNS.map((c) => `${alias}.${c}`).join(', ');
}

/**
 * The job columns in {@link jobColumns}' order, `alias.<column>` for those in `present` and `NULL`
 * for the rest: a statement that knows most of a row already returns only what the database
 * decided, and the row is completed from its input (the unparsed columns cost nothing to send).
 */
export function someJobColumns(alias: string, present: ReadonlySet<string>): string {
  return COLUMNS.map((c) => (present.has(c) ? `${alias}.${c}` : `NULL AS ${c}`)).join(', ');
}

/** A `jobs` row as `pg` parses it (bigint arrives as a string). */
export interface JobRow {
  id: string;
  uuid: string;
  queue: string;
  job_type: string;
  payload: unknown;
  status: JobStatus;
  priority: number;
  run_at: Date;
  attempt: number;
  max_attempts: number;
  idempotency_key: string | null;
  lock_key: string | null;
  leased_by: string | null;
  lease_expires_at: Date | null;
  cancel_requested_at: Date | null;
  last_error: string | null;
  steps: Step[] | null;
  result: unknown;
  retry_of_id: string | null;
  team_id: string | null;
  resource_id: string | null;
  resume_count: number;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  dead_lettered_at: Date | null;
}

const num = (v: string | null): number | null => (v === null ? null : Number(v));

/** Maps a row to the public {@link Job}. A JSON `null` timeline (older writers) reads as `[]`. */
export function toJob(r: JobRow): Job {
  return {
    id: Number(r.id),
    uuid: r.uuid,
    queue: r.queue,
    type: r.job_type,
    payload: r.payload,
    status: r.status,
    priority: r.priority,
    runAt: r.run_at,
    attempt: r.attempt,
    maxAttempts: r.max_attempts,
    idempotencyKey: r.idempotency_key,
    lockKey: r.lock_key,
    leasedBy: r.leased_by,
    leaseExpiresAt: r.lease_expires_at,
    cancelRequestedAt: r.cancel_requested_at,
    lastError: r.last_error,
    steps: Array.isArray(r.steps) ? r.steps : [],
    result: r.result,
    retryOfId: num(r.retry_of_id),
    teamId: num(r.team_id),
    resourceId: num(r.resource_id),
    resumeCount: r.resume_count,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    finishedAt: r.finished_at,
    deadLetteredAt: r.dead_lettered_at,
  };
}

/** Maps a claimed row (with its `lease_token`). */
export function toLeasedJob(r: JobRow & { lease_token: string }): LeasedJob {
  const job = toJob(r) as LeasedJob;
  job.leaseToken = r.lease_token;
  return job;
}
