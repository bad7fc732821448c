import { statement, type Statement } from '@q/schema/internal';

const COLUMNS = `j.id::text AS id, j.uuid::text AS uuid, j.queue, j.job_type, j.status::text AS status, j.attempt,
          j.max_attempts, j.job_group, j.run_at, j.created_at, j.finished_at`;
const FILTERS = `($1::__q_schema__.q_job_status IS NULL OR j.status = $1::__q_schema__.q_job_status)
      AND ($2::text IS NULL OR j.queue = $2::text)
      AND ($3::text IS NULL OR j.job_type = $3::text)
      AND ($4::text IS NULL OR j.job_group = $4::text)
      AND ($5::int8 IS NULL OR j.id < $5::int8)
      AND ($7::int8 IS NULL OR j.id >= $7::int8)`;
const list = (name: string, from: string) => statement(name, `SELECT ${COLUMNS} FROM ${from} j WHERE ${FILTERS} ORDER BY j.id DESC LIMIT $6`);

// Without a status: both tables (q_jobs_all), whose primary keys the planner merges walking
// backwards, stopping at the page size.
/**
 * One page of jobs, newest first: `$1` status, `$2` queue, `$3` type, `$4` group (null: any), `$5`
 * before id, `$6` limit, `$7` lowest id searched (null: none; see SEARCH_WINDOW in pages/jobs.ts).
 */
export const LIST_JOBS = list('q_dashboard_list_jobs', '__q_schema__.q_jobs_all');

// A finished status is only ever in the archive and a live one only in q_jobs: reading the one
// table keeps the planner from walking the other's whole primary key for rows it cannot hold
// (measured: 0.5 s for the dead letter on 1,000,000 live jobs through q_jobs_all). A rare status
// is then read through its partial status index (q_jobs_status_id_idx, q_jobs_archive_status_id_idx).
/** {@link LIST_JOBS} for a live status (scheduled, queued, leased, running, retry_wait, waiting): q_jobs only. */
export const LIST_LIVE_JOBS = list('q_dashboard_list_live_jobs', '__q_schema__.q_jobs');
/** {@link LIST_JOBS} for a finished status (succeeded, cancelled, dead_letter): q_jobs_archive only. */
export const LIST_FINISHED_JOBS = list('q_dashboard_list_finished_jobs', '__q_schema__.q_jobs_archive');

const FINISHED = new Set(['succeeded', 'cancelled', 'dead_letter']);

/** The list statement for a status filter (null: any). */
export function listStatement(status: string | null): Statement {
  if (status === null) return LIST_JOBS;
  return FINISHED.has(status) ? LIST_FINISHED_JOBS : LIST_LIVE_JOBS;
}
