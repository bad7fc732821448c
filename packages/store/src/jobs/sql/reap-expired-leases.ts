import { statement, type StatementScope } from '@q/schema/internal';
import type { JobStatus } from '../types.js';
import type { Queryable } from './db.js';

// A lapsed lease means the worker died or hung: not a failure. The attempt is given back and
// resume_count rises; once a job has already been resumed $1 times the next crash dead-letters it
// (attempt kept). Every CASE sees the old resume_count. An earlier last_error is kept. A job it
// dead-letters or cancels is moved to q_jobs_archive by the table's trigger (migration 0006).
const TEXT = `
UPDATE __q_schema__.q_jobs AS jobs SET
  status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'::__q_schema__.q_job_status
                WHEN resume_count >= $1 THEN 'dead_letter'::__q_schema__.q_job_status ELSE 'retry_wait'::__q_schema__.q_job_status END,
  dead_lettered_at = CASE WHEN cancel_requested_at IS NULL AND resume_count >= $1 THEN now() ELSE dead_lettered_at END,
  finished_at = CASE WHEN cancel_requested_at IS NOT NULL OR resume_count >= $1 THEN now() ELSE finished_at END,
  attempt = CASE WHEN cancel_requested_at IS NULL AND resume_count >= $1 THEN attempt ELSE greatest(attempt - 1, 0) END,
  resume_count = resume_count + 1,
  last_error = coalesce(last_error, 'lease expired (worker crash or hang)'),
  run_at = now(), leased_by = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
WHERE status IN ('leased', 'running') AND lease_expires_at < now() AND ($2::int8[] IS NULL OR id = ANY($2::int8[]))
RETURNING id, uuid, status`;

const TEXT_STMT = statement('q_jobs_reap', TEXT);

/** A job whose lapsed lease was taken back, with its new status. */
export interface ReapedRow {
  id: string;
  uuid: string;
  status: JobStatus;
}

/**
 * Takes back every lapsed lease (only those of the jobs `ids` when given: a maintenance round that
 * isolates a row it cannot reap); returns the jobs with their new status.
 */
export async function reapExpiredLeases(
  scope: StatementScope,
  db: Queryable,
  maxResumes: number,
  ids: readonly number[] | null = null,
): Promise<ReapedRow[]> {
  const { rows } = await scope.run<ReapedRow>(db, TEXT_STMT, [maxResumes, ids]);
  return rows;
}
