import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

// Jobs already enqueued for the schedule stay; no worker fires it from the moment this commits
// (the fire statement's compare-and-set finds no row).
const TEXT_STMT = statement('q_jobs_schedule_delete', `DELETE FROM __q_schema__.q_schedules WHERE name = $1::text`);

/** Deletes the schedule `name`; false when there was none. */
export async function deleteSchedule(scope: StatementScope, db: Queryable, name: string): Promise<boolean> {
  const r = await scope.run(db, TEXT_STMT, [name]);
  return r.rowCount === 1;
}
