import { onlyRow, statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';
import { SCHEDULE_COLUMNS, type ScheduleRow } from './schedule-row.js';

// Upsert by name. A replaced schedule keeps its scheduler state when its pattern and time zone
// are unchanged: every worker may call schedule() at start with the same definition, and that
// must neither skip the slots missed while they were down nor fire the current one again. A new
// pattern or time zone starts at its first slot after now ($10, computed by the caller). The
// job's fields are read by the statement that fires a slot, so a change of them applies from the
// next slot on. Schedulers sleep until the earliest next fire time they read: the notification
// ('s' on the job channel, $11, sent at commit) wakes them to read again, so a new schedule whose
// first slot comes sooner is not slept through.
const TEXT = `
WITH up AS (
INSERT INTO __q_schema__.q_schedules AS s (name, cron, timezone, queue, job_type, payload, priority, max_attempts, backfill_ms, next_fire_at, job_group)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::jsonb, $7::int4, $8::int4, $9::int8, $10::timestamptz, $11::text)
ON CONFLICT (name) DO UPDATE SET
  cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, queue = EXCLUDED.queue, job_type = EXCLUDED.job_type,
  payload = EXCLUDED.payload, priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts, backfill_ms = EXCLUDED.backfill_ms, job_group = EXCLUDED.job_group,
  next_fire_at = CASE WHEN s.cron = EXCLUDED.cron AND s.timezone = EXCLUDED.timezone THEN s.next_fire_at ELSE EXCLUDED.next_fire_at END,
  updated_at = now()
RETURNING ${SCHEDULE_COLUMNS}
)
SELECT up.* FROM up CROSS JOIN (SELECT pg_notify($12::text, 's')) n`;

const TEXT_STMT = statement('q_jobs_schedule_upsert', TEXT);

/** The columns of one upsert, checked by the caller. */
export interface ScheduleUpsert {
  name: string;
  cron: string;
  timezone: string;
  queue: string;
  type: string;
  /** JSON text of an object. */
  payload: string;
  priority: number;
  maxAttempts: number;
  /** The jobs' group, checked (null: none). */
  group: string | null;
  backfillMs: number | null;
  /** The pattern's first slot after now: used for a new schedule or a new pattern or time zone. */
  nextFireAt: Date;
}

/** Creates or replaces the schedule `u.name` and notifies `channel` (see above); returns the stored row. */
export async function upsertSchedule(scope: StatementScope, db: Queryable, u: ScheduleUpsert, channel: string): Promise<ScheduleRow> {
  const { rows } = await scope.run<ScheduleRow>(db, TEXT_STMT, [
    u.name,
    u.cron,
    u.timezone,
    u.queue,
    u.type,
    u.payload,
    u.priority,
    u.maxAttempts,
    u.backfillMs,
    u.nextFireAt,
    u.group,
    channel,
  ]);
  return onlyRow(rows, 'schedule upsert');
}
