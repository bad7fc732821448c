import { statement, type StatementScope } from '@q/schema';
import type { Queryable } from './db.js';

// Finished jobs are in the archive; their idempotency keys go with them, so a key is free again
// once its job is purged (and not before). The key row is matched on its job too: a key is only
// ever held by one job, but a key row and the job are deleted together or not at all.
const TEXT = `
WITH gone AS (
  DELETE FROM __q_schema__.q_jobs_archive
  WHERE status IN ('succeeded', 'cancelled') AND finished_at < now() - $1 * interval '1 millisecond'
  RETURNING id, idempotency_key
), keys AS (
  DELETE FROM __q_schema__.q_jobs_idempotency_keys k USING gone
  WHERE gone.idempotency_key IS NOT NULL AND k.idempotency_key = gone.idempotency_key AND k.job_id = gone.id
)
SELECT count(*)::int AS n FROM gone`;

const TEXT_STMT = statement('q_jobs_purge', TEXT);

/** Deletes succeeded/cancelled jobs finished more than `olderThanMs` ago; returns the count. */
export async function purgeFinished(scope: StatementScope, db: Queryable, olderThanMs: number): Promise<number> {
  const { rows } = await scope.run<{ n: number }>(db, TEXT_STMT, [olderThanMs]);
  return rows[0]?.n ?? 0;
}
