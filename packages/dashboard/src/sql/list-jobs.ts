import { statement } from '@q/schema/internal';

// Over both tables (q_jobs_all), newest first: the planner merges the two primary keys walked
// backwards and stops at the page size; a rare status is read through its partial status index.
/** One page of jobs: filters `$1` status, `$2` queue, `$3` type, `$4` group (null: any), `$5` before id, `$6` limit. */
export const LIST_JOBS = statement(
  'q_dashboard_list_jobs',
  `SELECT j.id::text AS id, j.uuid::text AS uuid, j.queue, j.job_type, j.status::text AS status, j.attempt,
          j.max_attempts, j.job_group, j.run_at, j.created_at, j.finished_at
     FROM __q_schema__.q_jobs_all j
    WHERE ($1::__q_schema__.q_job_status IS NULL OR j.status = $1::__q_schema__.q_job_status)
      AND ($2::text IS NULL OR j.queue = $2::text)
      AND ($3::text IS NULL OR j.job_type = $3::text)
      AND ($4::text IS NULL OR j.job_group = $4::text)
      AND ($5::int8 IS NULL OR j.id < $5::int8)
    ORDER BY j.id DESC
    LIMIT $6`,
);
