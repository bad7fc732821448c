import { statement, type StatementScope } from '@q/schema/internal';
import type { JobStatus } from '../types.js';
import { liveJobByUuid } from './by-uuid.js';
import type { Queryable } from './db.js';

// A waiting job is cancelled at once (and moved to q_jobs_archive by the table's trigger, after
// this statement's RETURNING). A leased/running one gets cancel_requested_at, and its
// worker is told on the notification channel (heartbeats carry the flag too, as a fallback).
const TEXT = `
WITH c AS (
  UPDATE __q_schema__.q_jobs AS jobs SET
    status = CASE WHEN status IN ('queued', 'scheduled', 'retry_wait', 'waiting') THEN 'cancelled'::__q_schema__.q_job_status ELSE status END,
    finished_at = CASE WHEN status IN ('queued', 'scheduled', 'retry_wait', 'waiting') THEN now() ELSE finished_at END,
    cancel_requested_at = coalesce(cancel_requested_at, now()),
    updated_at = now()
  WHERE ${liveJobByUuid('jobs', '$1')} AND status IN ('queued', 'scheduled', 'retry_wait', 'waiting', 'leased', 'running')
  RETURNING id, status
)
SELECT c.id, c.status,
       (SELECT count(*) FROM (SELECT pg_notify($2, 'c:' || c2.id) FROM c c2 WHERE c2.status <> 'cancelled') n) AS notified
FROM c`;

const TEXT_STMT = statement('q_jobs_cancel', TEXT);

/** Cancels (or requests cancellation of) the job; returns its new status, or undefined. */
export async function cancelJob(
  scope: StatementScope,
  db: Queryable,
  uuid: string,
  channel: string,
): Promise<{ id: string; status: JobStatus } | undefined> {
  const { rows } = await scope.run<{ id: string; status: JobStatus }>(db, TEXT_STMT, [uuid, channel]);
  return rows[0];
}
