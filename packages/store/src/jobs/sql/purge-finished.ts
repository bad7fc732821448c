import { statement, type StatementScope } from '@q/schema';
import type { Queryable } from './db.js';

const TEXT = `
DELETE FROM __q_schema__.q_jobs
WHERE status IN ('succeeded', 'cancelled') AND finished_at < now() - $1 * interval '1 millisecond'`;

const TEXT_STMT = statement('q_jobs_purge', TEXT);

/** Deletes succeeded/cancelled jobs finished more than `olderThanMs` ago; returns the count. */
export async function purgeFinished(scope: StatementScope, db: Queryable, olderThanMs: number): Promise<number> {
  const r = await scope.run(db, TEXT_STMT, [olderThanMs]);
  return r.rowCount ?? 0;
}
