import { statement, type StatementScope } from '@q/schema/internal';
import { type Db } from './db.js';

export const nowStatement = statement('q_store_now', `SELECT clock_timestamp() AS now`);

/** The database clock. */
export async function databaseNow(scope: StatementScope, db: Db): Promise<Date> {
  const { rows } = await scope.run<{ now: Date }>(db, nowStatement, []);
  const now = rows[0]?.now;
  if (!(now instanceof Date)) throw new Error('now: no clock reading');
  return now;
}

export const truncateStatement = statement(
  'q_store_truncate',
  `TRUNCATE __q_schema__.q_requests, __q_schema__.q_partitions, __q_schema__.q_dispatchers, __q_schema__.q_results,
   __q_schema__.q_batch_file_lines, __q_schema__.q_batch_files, __q_schema__.q_batch_requests, __q_schema__.q_batches`,
);

/** Empties every table of the request queue. */
export async function truncateAll(scope: StatementScope, db: Db): Promise<void> {
  await scope.run(db, truncateStatement, []);
}
