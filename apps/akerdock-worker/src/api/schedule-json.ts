import type { ScheduleInfo } from '../job-types.js';

/** A schedule as the admin API and `q-jobs schedules list --json` show it (snake_case, ISO-8601 UTC instants). */
export interface ScheduleJson {
  name: string;
  cron: string;
  timezone: string;
  queue: string;
  type: string;
  /** Every job's payload is this object plus `scheduledFor` (its slot). */
  payload: Record<string, unknown>;
  priority: number;
  max_attempts: number;
  /** The group of every job it enqueues, or null. */
  group: string | null;
  /** Null: after downtime only the latest missed slot is enqueued; else every slot of the last `backfill_ms`. */
  backfill_ms: number | null;
  /** The first slot not yet enqueued: when the next job is enqueued. */
  next_fire_at: string;
  /** The latest slot enqueued, or null before the first. */
  last_slot: string | null;
  /** When it was paused (no job is enqueued until it is resumed), or null while it runs. */
  paused_at: string | null;
  created_at: string;
  updated_at: string;
}

/** Maps a stored schedule to its API shape. */
export function scheduleToJson(s: ScheduleInfo): ScheduleJson {
  return {
    name: s.name,
    cron: s.cron,
    timezone: s.timezone,
    queue: s.queue,
    type: s.type,
    payload: s.payload,
    priority: s.priority,
    max_attempts: s.maxAttempts,
    group: s.group,
    backfill_ms: s.backfillMs,
    next_fire_at: s.nextFireAt.toISOString(),
    last_slot: s.lastSlot === null ? null : s.lastSlot.toISOString(),
    paused_at: s.pausedAt === null ? null : s.pausedAt.toISOString(),
    created_at: s.createdAt.toISOString(),
    updated_at: s.updatedAt.toISOString(),
  };
}
