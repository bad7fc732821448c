// Recurring jobs' storage: creating, replacing, listing and deleting schedules, and a scheduler
// tick's two statements (read the due schedules, fire them). The cron arithmetic is the caller's
// (`@q/job-worker`): the store checks and stores what it is given, and fences each firing.
import { createHash } from 'node:crypto';
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import { checkName } from '@q/schema/internal';
import { jsonText } from '../json.js';
import { deleteSchedule as deleteScheduleRow } from '../sql/schedule-delete.js';
import { dueSchedules as dueScheduleRows, type DueSchedules } from '../sql/schedule-due.js';
import { fireSchedules as fireScheduleRows, type FireResult, type ScheduleFiring } from '../sql/schedule-fire.js';
import { getSchedule as getScheduleRow } from '../sql/schedule-get.js';
import { listSchedules as listScheduleRows } from '../sql/schedule-list.js';
import { pauseSchedule as pauseScheduleRow } from '../sql/schedule-pause.js';
import { resumeSchedule as resumeScheduleRow } from '../sql/schedule-resume.js';
import type { ScheduleRow } from '../sql/schedule-row.js';
import { upsertSchedule as upsertScheduleRow } from '../sql/schedule-upsert.js';
import { DEFAULT_MAX_ATTEMPTS, INT32_MAX, MAX_DELAY_MS } from '../validate.js';
import type { JobStoreContext } from './context.js';

export type { DueSchedule, DueSchedules } from '../sql/schedule-due.js';
export type { FireResult } from '../sql/schedule-fire.js';

/** A schedule as stored: its definition and the scheduler's state. */
export interface StoredSchedule {
  name: string;
  /** Cron pattern (5 fields, or 6 with seconds first). */
  cron: string;
  /** IANA time zone the pattern is read in. */
  timezone: string;
  queue: string;
  type: string;
  /** The payload of every job (each job's also carries `scheduledFor`). */
  payload: Record<string, unknown>;
  priority: number;
  maxAttempts: number;
  /** The group of every job it enqueues (null: none): see `NewJob.group`. */
  group: string | null;
  /** Null: after downtime only the latest missed slot is enqueued; else every slot of the last `backfillMs`. */
  backfillMs: number | null;
  /** The first slot not yet enqueued. */
  nextFireAt: Date;
  /** The latest slot enqueued, or null before the first. */
  lastSlot: Date | null;
  /** When it was paused, or null while it runs: a paused schedule enqueues nothing. */
  pausedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

/** What {@link upsertSchedule} stores; the cron pattern and time zone are checked by the caller. */
export interface ScheduleInput {
  name: string;
  cron: string;
  timezone: string;
  queue: string;
  type: string;
  payload?: Record<string, unknown> | undefined;
  priority?: number | undefined;
  maxAttempts?: number | undefined;
  /** The group of every job it enqueues (null or absent: none). */
  group?: string | null | undefined;
  backfillMs?: number | null | undefined;
  /** The pattern's first slot after now (kept unused when the stored pattern and time zone are the same). */
  nextFireAt: Date;
}

/** A due schedule to fire, as {@link fireSchedules} takes it: the keys are derived here. */
export type ScheduleFire = Omit<ScheduleFiring, 'keys'>;

/** Longest tick read, in schedules: a tick with more due reads the rest next time, at once. */
export const MAX_DUE_PER_TICK = 1_000;

const SCHEDULE_KEY_PREFIX = 'q:schedule:';

/**
 * The idempotency key of the job of `name`'s slot `slot`: a hash of the name (any length of name
 * fits) and the slot in ISO 8601. Also how a handler can recognise a scheduled job.
 */
export function scheduleJobKey(name: string, slot: Date): string {
  return `${SCHEDULE_KEY_PREFIX}${createHash('sha256').update(name).digest('hex').slice(0, 32)}:${slot.toISOString()}`;
}

/** Checks a schedule name: `<op>: name must …`. */
export function checkScheduleName(op: string, name: unknown): string {
  return checkName(op, 'name', name);
}

function checkInt(op: string, what: string, v: unknown, min: number, dflt: number): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > INT32_MAX) {
    throw invalidArgument(`${op}: ${what} must be an integer between ${min} and ${INT32_MAX}`);
  }
  return v;
}

function checkDate(op: string, what: string, v: unknown): Date {
  if (!(v instanceof Date) || Number.isNaN(v.getTime())) throw invalidArgument(`${op}: ${what} must be a valid Date`);
  return v;
}

/** `JobStore.upsertSchedule`: every field checked before the statement. */
export async function upsertSchedule(ctx: JobStoreContext, input: ScheduleInput): Promise<StoredSchedule> {
  const op = 'schedule';
  if (!input || typeof input !== 'object') throw invalidArgument(`${op}: the schedule must be an object`);
  const name = checkScheduleName(op, input.name);
  const cron = checkName(op, 'cron', input.cron);
  const timezone = checkName(op, 'timezone', input.timezone);
  const queue = checkName(op, 'queue', input.queue);
  const type = checkName(op, 'type', input.type);
  const payload = input.payload ?? {};
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) throw invalidArgument(`${op}: payload must be a JSON object`);
  if (Object.hasOwn(payload, 'scheduledFor'))
    throw invalidArgument(`${op}: payload must not have a scheduledFor key (each job's carries its slot there)`);
  const json = jsonText(payload, 'payload', 'strict');
  if ('problem' in json) throw invalidArgument(`${op}: ${json.problem}`);
  if (json.text === null || !json.text.startsWith('{')) throw invalidArgument(`${op}: payload must be a JSON object`);
  const group = input.group === undefined || input.group === null ? null : checkName(op, 'group', input.group);
  const backfill = input.backfillMs ?? null;
  if (backfill !== null && (typeof backfill !== 'number' || !Number.isInteger(backfill) || backfill < 1 || backfill > MAX_DELAY_MS)) {
    throw invalidArgument(`${op}: backfill.maxMs must be a positive integer of milliseconds, at most 100 years`);
  }
  const row = await ctx.op('schedule_upsert', () =>
    upsertScheduleRow(
      ctx.scope,
      ctx.pool,
      {
        name,
        cron,
        timezone,
        queue,
        type,
        payload: json.text as string,
        priority: checkInt(op, 'priority', input.priority, -2_147_483_648, 0),
        maxAttempts: checkInt(op, 'maxAttempts', input.maxAttempts, 1, DEFAULT_MAX_ATTEMPTS),
        group,
        backfillMs: backfill,
        nextFireAt: checkDate(op, 'nextFireAt', input.nextFireAt),
      },
      ctx.channel,
    ),
  );
  return toSchedule(row);
}

/** `JobStore.deleteSchedule`. */
export async function deleteSchedule(ctx: JobStoreContext, name: string): Promise<boolean> {
  checkScheduleName('unschedule', name);
  return ctx.op('schedule_delete', () => deleteScheduleRow(ctx.scope, ctx.pool, name));
}

/** `JobStore.listSchedules`. */
export async function listSchedules(ctx: JobStoreContext): Promise<StoredSchedule[]> {
  const rows = await ctx.op('schedule_list', () => listScheduleRows(ctx.scope, ctx.pool));
  return rows.map(toSchedule);
}

/** `JobStore.pauseSchedule`. */
export async function pauseSchedule(ctx: JobStoreContext, name: string): Promise<StoredSchedule | null> {
  checkScheduleName('pauseSchedule', name);
  const row = await ctx.op('schedule_pause', () => pauseScheduleRow(ctx.scope, ctx.pool, name));
  return row === null ? null : toSchedule(row);
}

/**
 * `JobStore.resumeSchedule`: reads the schedule, and resumes it at `firstSlot(cron, timezone)`
 * if its pattern is unchanged when it writes (else reads it again, at most three times).
 */
export async function resumeSchedule(
  ctx: JobStoreContext,
  name: string,
  firstSlot: (cron: string, timezone: string) => Date,
): Promise<StoredSchedule | null> {
  checkScheduleName('resumeSchedule', name);
  if (typeof firstSlot !== 'function') throw invalidArgument('resumeSchedule: firstSlot must be a function');
  for (let attempt = 0; attempt < 3; attempt++) {
    const current = await ctx.op('schedule_get', () => getScheduleRow(ctx.scope, ctx.pool, name));
    if (current === null) return null;
    if (current.paused_at === null) return toSchedule(current);
    const next = checkDate('resumeSchedule', 'the first slot', firstSlot(current.cron, current.timezone));
    const row = await ctx.op('schedule_resume', () =>
      resumeScheduleRow(ctx.scope, ctx.pool, name, current.cron, current.timezone, next, ctx.channel),
    );
    if (row !== null) return toSchedule(row);
  }
  throw new QError(QErrorCode.CONFLICT, `resumeSchedule: the schedule ${JSON.stringify(name)} kept changing while it was resumed`);
}

/** `JobStore.dueSchedules`. */
export async function dueSchedules(ctx: JobStoreContext, now: Date | null, limit = MAX_DUE_PER_TICK): Promise<DueSchedules> {
  if (now !== null) checkDate('dueSchedules', 'now', now);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_DUE_PER_TICK) {
    throw invalidArgument(`dueSchedules: limit must be an integer between 1 and ${MAX_DUE_PER_TICK}`);
  }
  return ctx.op('schedule_due', () => dueScheduleRows(ctx.scope, ctx.pool, now, limit));
}

/** `JobStore.fireSchedules`. */
export async function fireSchedules(ctx: JobStoreContext, firings: readonly ScheduleFire[]): Promise<FireResult> {
  if (!Array.isArray(firings as unknown)) throw invalidArgument('fireSchedules: firings must be an array');
  if (firings.length === 0) return { fired: [], enqueued: 0 };
  const withKeys = firings.map((f, i) => {
    if (!f || typeof f !== 'object' || !Array.isArray(f.slots)) throw invalidArgument(`fireSchedules: firing ${i} must have an array of slots`);
    checkScheduleName('fireSchedules', f.name);
    for (const s of f.slots) checkDate('fireSchedules', 'slot', s);
    checkDate('fireSchedules', 'nextFireAt', f.nextFireAt);
    checkDate('fireSchedules', 'expectedNextFireAt', f.expectedNextFireAt);
    return { ...f, keys: f.slots.map((s) => scheduleJobKey(f.name, s)) };
  });
  return ctx.op('schedule_fire', () => fireScheduleRows(ctx.scope, ctx.pool, withKeys, ctx.channel));
}

function toSchedule(r: ScheduleRow): StoredSchedule {
  return {
    name: r.name,
    cron: r.cron,
    timezone: r.timezone,
    queue: r.queue,
    type: r.job_type,
    payload: r.payload,
    priority: r.priority,
    maxAttempts: r.max_attempts,
    group: r.job_group,
    backfillMs: r.backfill_ms,
    nextFireAt: r.next_fire_at,
    lastSlot: r.last_slot,
    pausedAt: r.paused_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}
