import type { Job, JobFlowNode, JobStatus, LeasedJob, Step } from './types.js';
import { splitErrorText } from './error-text.js';

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
  'snoozes',
  'progress',
  'job_key',
  'job_group',
  'flow_id',
  'flow_ref',
  'parents_left',
] as const;

/** The job columns every statement returns, in order. */
export const JOB_COLUMN_NAMES: readonly string[] = COLUMNS;

/** How many columns {@link jobColumns} lists. */
export const JOB_COLUMN_COUNT = COLUMNS.length;

/** The position of each column in {@link jobColumns}. */
const AT = Object.freeze(Object.fromEntries(COLUMNS.map((c, i) => [c, i]))) as Readonly<Record<(typeof COLUMNS)[number], number>>;

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
  snoozes: number;
  progress: unknown;
  job_key: string | null;
  job_group: string | null;
  flow_id: string | null;
  flow_ref: string | null;
  parents_left: number | null;
}

/**
 * The idempotency key a throttled enqueue stores (see resolveThrottleSlots in ops/enqueue.ts): U+0001, `throttle:`, the
 * window in ms, the window's number since the epoch, then the job key, joined by `:`. It is the
 * job's job key that is shown, never this slot key.
 */
export const THROTTLE_SLOT_PREFIX = '\u0001throttle:';

/** A stored idempotency key as the job shows it, and its job key: a throttle slot key shows as its job key. */
export function shownKeys(stored: string | null, jobKey: string | null): { idempotencyKey: string | null; jobKey: string | null } {
  return throttled(stored) ? { idempotencyKey: null, jobKey: throttledJobKey(stored) } : { idempotencyKey: stored, jobKey };
}

/** Whether `key` is a throttle slot key (see {@link THROTTLE_SLOT_PREFIX}). */
function throttled(key: string | null): key is string {
  return key !== null && key.charCodeAt(0) === 1 && key.startsWith(THROTTLE_SLOT_PREFIX);
}

/** The job key of a throttle slot key: what follows its window and slot. */
function throttledJobKey(key: string): string {
  const afterWindow = key.indexOf(':', THROTTLE_SLOT_PREFIX.length);
  return key.slice(key.indexOf(':', afterWindow + 1) + 1);
}

const num = (v: string | null): number | null => (v === null ? null : Number(v));

/** Maps a row to the public {@link Job}. A JSON `null` timeline (older writers) reads as `[]`. */
export function toJob(r: JobRow): Job {
  return jobOf(
    COLUMNS.map((c) => r[c]),
    0,
  );
}

/**
 * The {@link Job} of an array row (a statement run with `rowMode: 'array'`) whose job columns,
 * in {@link jobColumns}' order, start at position `at`.
 */
function jobOf(v: readonly unknown[], at: number): Job {
  const steps = v[at + AT.steps];
  // `last_error` holds the message and, when kept, the stack (see error-text.ts).
  const stored = v[at + AT.last_error] as string | null;
  const error = stored === null ? NO_ERROR : splitErrorText(stored);
  const key = v[at + AT.idempotency_key] as string | null;
  return {
    id: Number(v[at + AT.id] as string),
    uuid: v[at + AT.uuid] as string,
    queue: v[at + AT.queue] as string,
    type: v[at + AT.job_type] as string,
    payload: v[at + AT.payload],
    status: v[at + AT.status] as JobStatus,
    priority: v[at + AT.priority] as number,
    runAt: v[at + AT.run_at] as Date,
    attempt: v[at + AT.attempt] as number,
    maxAttempts: v[at + AT.max_attempts] as number,
    idempotencyKey: throttled(key) ? null : key,
    lockKey: v[at + AT.lock_key] as string | null,
    leasedBy: v[at + AT.leased_by] as string | null,
    leaseExpiresAt: v[at + AT.lease_expires_at] as Date | null,
    cancelRequestedAt: v[at + AT.cancel_requested_at] as Date | null,
    lastError: error.message,
    lastErrorStack: error.stack,
    steps: Array.isArray(steps) ? (steps as Step[]) : [],
    result: v[at + AT.result],
    retryOfId: num(v[at + AT.retry_of_id] as string | null),
    teamId: num(v[at + AT.team_id] as string | null),
    resourceId: num(v[at + AT.resource_id] as string | null),
    resumeCount: v[at + AT.resume_count] as number,
    createdAt: v[at + AT.created_at] as Date,
    updatedAt: v[at + AT.updated_at] as Date,
    finishedAt: v[at + AT.finished_at] as Date | null,
    deadLetteredAt: v[at + AT.dead_lettered_at] as Date | null,
    snoozes: v[at + AT.snoozes] as number,
    progress: v[at + AT.progress] ?? null,
    jobKey: throttled(key) ? throttledJobKey(key) : ((v[at + AT.job_key] as string | null | undefined) ?? null),
    group: (v[at + AT.job_group] as string | null | undefined) ?? null,
    ...flowOf(v, at),
  };
}

/** `{ flow }` for a flow node (only then: a job outside flows has no such key), else `{}`. */
function flowOf(v: readonly unknown[], at: number): { flow?: JobFlowNode } {
  const id = v[at + AT.flow_id] as string | null | undefined;
  if (id === null || id === undefined) return {};
  const ref = v[at + AT.flow_ref] as string | null;
  return { flow: { id, ref: ref ?? String(v[at + AT.id] as string), released: v[at + AT.parents_left] === 0 } };
}

/** What a claimer knows of the jobs it leased without reading them back (see claim-jobs.ts). */
export interface ClaimedAs {
  status: 'leased' | 'running';
  workerId: string;
  leaseMs: number;
}

/**
 * The {@link LeasedJob} of a claimed array row holding the job columns from position `at`, then
 * the lease token; the status, the lease holder and the lease expiry (the claim's `now()`, which
 * is also the row's `updated_at`, plus the lease) come from the claim itself, not the row.
 */
export function leasedJobOf(v: readonly unknown[], at: number, claim: ClaimedAs): LeasedJob {
  const job = jobOf(v, at) as LeasedJob;
  job.status = claim.status;
  job.leasedBy = claim.workerId;
  job.leaseExpiresAt = new Date(job.updatedAt.getTime() + claim.leaseMs);
  job.leaseToken = v[at + JOB_COLUMN_COUNT] as string;
  return job;
}

const NO_ERROR = Object.freeze({ message: null, stack: null });
