/** A row of `q_schedules` as the schedule statements return it. */
export interface ScheduleRow {
  name: string;
  cron: string;
  timezone: string;
  queue: string;
  job_type: string;
  payload: Record<string, unknown>;
  priority: number;
  max_attempts: number;
  job_group: string | null;
  /** float8: a bigint column, returned as a number. */
  backfill_ms: number | null;
  next_fire_at: Date;
  last_slot: Date | null;
  /** When it was paused (null: running). */
  paused_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** The select list of a {@link ScheduleRow}. */
export const SCHEDULE_COLUMNS = `name, cron, timezone, queue, job_type, payload, priority, max_attempts, job_group, backfill_ms::float8 AS backfill_ms,
  next_fire_at, last_slot, paused_at, created_at, updated_at`;
