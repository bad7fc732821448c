import type { Queryable } from './db.js';

const TEXT = `
DELETE FROM jobs
WHERE status IN ('succeeded', 'cancelled') AND finished_at < now() - $1 * interval '1 millisecond'`;

/** Deletes succeeded/cancelled jobs finished more than `olderThanMs` ago; returns the count. */
export async function purgeFinished(db: Queryable, olderThanMs: number): Promise<number> {
  const r = await db.query({ name: 'q_jobs_purge', text: TEXT, values: [olderThanMs] });
  return r.rowCount ?? 0;
}
