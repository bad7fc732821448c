// The producer side of recurring jobs: checks a schedule's definition (its pattern and time zone
// through croner) and stores it. Firing is the workers' (scheduler.ts).
import { invalidArgument } from '@q/schema';
import { checkName } from '@q/schema/internal';
import type { JobStore, StoredSchedule } from '@q/store/jobs';
import { compileCron } from './cron.js';

/** Default time zone of a schedule's pattern. */
export const DEFAULT_SCHEDULE_TIMEZONE = 'UTC';

/** A recurring job: `JobQueue.schedule` creates or replaces it by `name`. */
export interface ScheduleOptions {
  /** Unique name (non-empty, at most 2,048 UTF-8 bytes, no NUL): a schedule of that name is replaced. */
  name: string;
  /** Cron pattern: 5 fields (minute first), or 6 with seconds first. */
  cron: string;
  /** IANA time zone the pattern is read in (DST included). Default `UTC`. */
  timezone?: string;
  /** Job type of every job enqueued. */
  type: string;
  /**
   * A JSON object: each job's payload is it with `scheduledFor` added (the slot, ISO 8601 in
   * UTC), so it must not have that key itself. Default `{}`.
   */
  payload?: Record<string, unknown>;
  /** Queue of the jobs. Default `default`. */
  queue?: string;
  priority?: number;
  maxAttempts?: number;
  /**
   * The group of every job it enqueues (see `EnqueueOptions.group`): a worker's `limits` and
   * fair claims apply to them as to any job of that group. Default: none.
   */
  group?: string;
  /**
   * After downtime, by default only the most recent missed slot is enqueued. With
   * `{ maxMs }`, every slot in the last `maxMs` (at least that latest one), oldest first.
   */
  backfill?: { maxMs: number };
}

/** A stored schedule: its definition, its next fire time and the last slot enqueued. */
export type ScheduleInfo = StoredSchedule;

/** `JobQueue.schedule`: every field checked (`INVALID_ARGUMENT`, nothing written) before the upsert. */
export async function upsertSchedule(store: JobStore, opts: ScheduleOptions, now: Date = new Date()): Promise<ScheduleInfo> {
  const op = 'schedule';
  if (!opts || typeof opts !== 'object') throw invalidArgument(`${op}: options must be ScheduleOptions (an object)`);
  const name = checkName(op, 'name', opts.name);
  const timezone = opts.timezone ?? DEFAULT_SCHEDULE_TIMEZONE;
  const cron = compileCron(op, opts.cron, timezone);
  const first = cron.after(now);
  if (first === null) throw invalidArgument(`${op}: cron must have a slot after now`);
  let backfillMs: number | null = null;
  if (opts.backfill !== undefined && opts.backfill !== null) {
    if (typeof opts.backfill !== 'object') throw invalidArgument(`${op}: backfill must be { maxMs }`);
    backfillMs = opts.backfill.maxMs;
    if (typeof backfillMs !== 'number') throw invalidArgument(`${op}: backfill.maxMs must be a positive integer of milliseconds`);
  }
  return store.upsertSchedule({
    name,
    cron: opts.cron,
    timezone,
    queue: opts.queue ?? 'default',
    type: opts.type,
    payload: opts.payload,
    priority: opts.priority,
    maxAttempts: opts.maxAttempts,
    group: opts.group,
    backfillMs,
    nextFireAt: first,
  });
}

/**
 * The slot a scheduled job was enqueued for (its payload's `scheduledFor`), or null for a job no
 * schedule enqueued. Idempotent handlers can key on it.
 */
export function scheduledFor(job: { payload: unknown; idempotencyKey: string | null }): Date | null {
  if (job.idempotencyKey === null || !job.idempotencyKey.startsWith('q:schedule:')) return null;
  const p = job.payload as { scheduledFor?: unknown } | null;
  if (!p || typeof p.scheduledFor !== 'string') return null;
  const d = new Date(p.scheduledFor);
  return Number.isNaN(d.getTime()) ? null : d;
}

/** `JobQueue.resumeSchedule`: the first slot after `now` of the pattern as stored; null: no such schedule. */
export function resumeStoredSchedule(store: JobStore, name: string, now: Date = new Date()): Promise<ScheduleInfo | null> {
  return store.resumeSchedule(name, (cron, timezone) => {
    const next = compileCron('resumeSchedule', cron, timezone).after(now);
    if (next === null) throw invalidArgument('resumeSchedule: cron must have a slot after now');
    return next;
  });
}
