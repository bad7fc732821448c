import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';
import { SCHEDULE_COLUMNS, type ScheduleRow } from './schedule-row.js';

// Resumes a paused schedule at $4, the pattern's first slot after now (computed by the caller from
// the pattern and time zone it read, $2 and $3: a compare-and-set, so a pattern replaced meanwhile
// is not resumed at the old pattern's slot). The slots of the paused time are not enqueued.
// Schedulers sleep until the earliest next fire time they read: the notification ('s' on the job
// channel, $5, sent at commit) wakes them to read again.
const TEXT_STMT = statement(
  'q_jobs_schedule_resume',
  `WITH r AS (
     UPDATE __q_schema__.q_schedules SET paused_at = NULL, next_fire_at = $4::timestamptz, updated_at = now()
      WHERE name = $1::text AND paused_at IS NOT NULL AND cron = $2::text AND timezone = $3::text
     RETURNING ${SCHEDULE_COLUMNS}
   )
   SELECT r.* FROM r CROSS JOIN (SELECT pg_notify($5::text, 's')) n`,
);

/** Resumes the paused schedule `name` at `nextFireAt` if its pattern is still `cron` in `timezone`; null otherwise. */
export async function resumeSchedule(
  scope: StatementScope,
  db: Queryable,
  name: string,
  cron: string,
  timezone: string,
  nextFireAt: Date,
  channel: string,
): Promise<ScheduleRow | null> {
  const { rows } = await scope.run<ScheduleRow>(db, TEXT_STMT, [name, cron, timezone, nextFireAt, channel]);
  return rows[0] ?? null;
}
