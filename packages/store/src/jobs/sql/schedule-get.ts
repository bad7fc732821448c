import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';
import { SCHEDULE_COLUMNS, type ScheduleRow } from './schedule-row.js';

const TEXT_STMT = statement('q_jobs_schedule_get', `SELECT ${SCHEDULE_COLUMNS} FROM __q_schema__.q_schedules WHERE name = $1::text`);

/** The schedule `name`, or null. */
export async function getSchedule(scope: StatementScope, db: Queryable, name: string): Promise<ScheduleRow | null> {
  const { rows } = await scope.run<ScheduleRow>(db, TEXT_STMT, [name]);
  return rows[0] ?? null;
}
