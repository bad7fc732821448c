import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

// Finished jobs are in the archive. Their idempotency keys go with them (the archive's delete
// trigger q_jobs_release_key), so a key is free again once its job is purged, and not before.
// The rate slots whose window has passed go too (they count for nothing: see migration 0011);
// without this a group seen once would keep its rows for good.
const TEXT = `
WITH slots AS (
  DELETE FROM __q_schema__.q_job_rate_slots WHERE started_at < now() - window_ms * interval '1 millisecond'
)
DELETE FROM __q_schema__.q_jobs_archive
WHERE status IN ('succeeded', 'cancelled') AND finished_at < now() - $1 * interval '1 millisecond'`;

const TEXT_STMT = statement('q_jobs_purge', TEXT);

/** Deletes succeeded/cancelled jobs finished more than `olderThanMs` ago (and spent rate slots); returns the jobs' count. */
export async function purgeFinished(scope: StatementScope, db: Queryable, olderThanMs: number): Promise<number> {
  const r = await scope.run(db, TEXT_STMT, [olderThanMs]);
  return r.rowCount ?? 0;
}
