import { statement, type StatementScope } from '@q/schema/internal';
import { MAX_NOTIFY_QUEUE_BYTES, type Queryable } from './db.js';

// $2: NULL for every due job, or the ids to promote (a maintenance round that isolates a row that
// cannot be promoted, see ops/maintenance.ts).
const TEXT = `
WITH p AS (
  UPDATE __q_schema__.q_jobs AS jobs SET status = 'queued', updated_at = now()
  WHERE status IN ('scheduled', 'retry_wait') AND run_at <= now() AND ($2::int8[] IS NULL OR id = ANY($2::int8[]))
  RETURNING queue
)
SELECT count(*)::int AS promoted,
       (SELECT count(*) FROM (SELECT pg_notify($1, 'q:' || d.queue) FROM (SELECT DISTINCT queue FROM p) d
                             WHERE octet_length(d.queue) < ${MAX_NOTIFY_QUEUE_BYTES}) n) AS notified
FROM p`;

const TEXT_STMT = statement('q_jobs_promote', TEXT);

/**
 * scheduled/retry_wait → queued once `run_at` is due (only the jobs `ids` when given); wakes idle
 * workers. Returns the count.
 */
export async function promoteDueJobs(
  scope: StatementScope,
  db: Queryable,
  channel: string,
  ids: readonly number[] | null = null,
): Promise<number> {
  const { rows } = await scope.run<{ promoted: number }>(db, TEXT_STMT, [channel, ids]);
  return rows[0]?.promoted ?? 0;
}
