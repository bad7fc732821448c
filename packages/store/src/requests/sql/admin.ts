import { run, type Db, type Statement } from './db.js';

export const nowStatement: Statement = { name: 'q_store_now', text: `SELECT clock_timestamp() AS now` };

/** The database clock. */
export async function databaseNow(db: Db): Promise<Date> {
  const { rows } = await run<{ now: Date }>(db, nowStatement, []);
  const now = rows[0]?.now;
  if (!(now instanceof Date)) throw new Error('now: no clock reading');
  return now;
}

export const truncateStatement: Statement = {
  name: 'q_store_truncate',
  text: `TRUNCATE async_requests, async_partitions, async_dispatchers, async_results`,
};

/** Empties every table of the request queue. */
export async function truncateAll(db: Db): Promise<void> {
  await run(db, truncateStatement, []);
}
