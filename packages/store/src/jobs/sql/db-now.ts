import type { Queryable } from './db.js';

/** The database clock. */
export async function dbNow(db: Queryable): Promise<Date> {
  const { rows } = await db.query<{ now: Date }>({ name: 'q_jobs_now', text: 'SELECT clock_timestamp() AS now' });
  return rows[0]!.now;
}
