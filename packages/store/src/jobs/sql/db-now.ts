import { statement, type StatementScope, onlyRow } from '@q/schema/internal';
import type { Queryable } from './db.js';

const NOW = statement('q_jobs_now', 'SELECT clock_timestamp() AS now');

/** The database clock. */
export async function dbNow(scope: StatementScope, db: Queryable): Promise<Date> {
  const { rows } = await scope.run<{ now: Date }>(db, NOW, []);
  return onlyRow(rows, 'now').now;
}
