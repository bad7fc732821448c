import { statement } from '@q/schema/internal';

// Two primary-key lookups (the last entry of each index).
/** The highest job id of both tables (null when there are no jobs). */
export const MAX_JOB_ID = statement(
  'q_dashboard_max_job_id',
  `SELECT greatest((SELECT max(id) FROM __q_schema__.q_jobs), (SELECT max(id) FROM __q_schema__.q_jobs_archive))::text AS id`,
);
