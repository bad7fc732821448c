import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';
import { SCHEDULE_COLUMNS, type ScheduleRow } from './schedule-row.js';

const TEXT_STMT = statement('q_jobs_schedule_list', `SELECT ${SCHEDULE_COLUMNS} FROM __q_schema__.q_schedules ORDER BY name`);

/** Every schedule, by name. */
export async function listSchedules(scope: StatementScope, db: Queryable): Promise<ScheduleRow[]> {
  const { rows } = await scope.run<ScheduleRow>(db, TEXT_STMT, []);
  return rows;
}
