import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';
import { SCHEDULE_COLUMNS, type ScheduleRow } from './schedule-row.js';

// Pausing a paused schedule keeps when it was first paused. A scheduler that read the schedule as
// due before this commits does not fire it after: the fire statement's compare-and-set requires
// `paused_at IS NULL` on the row it locks.
const TEXT_STMT = statement(
  'q_jobs_schedule_pause',
  `UPDATE __q_schema__.q_schedules SET paused_at = coalesce(paused_at, now()), updated_at = now()
    WHERE name = $1::text RETURNING ${SCHEDULE_COLUMNS}`,
);

/** Pauses the schedule `name`; null when there is none. */
export async function pauseSchedule(scope: StatementScope, db: Queryable, name: string): Promise<ScheduleRow | null> {
  const { rows } = await scope.run<ScheduleRow>(db, TEXT_STMT, [name]);
  return rows[0] ?? null;
}
