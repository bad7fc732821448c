import { statement } from '@q/schema/internal';

// Jobs per queue and status. Each branch spells out the predicate of one partial index, so no
// branch reads the history of finished jobs: the live statuses from q_jobs' partial indexes,
// `waiting` (flow nodes) through q_jobs_flow_idx, the dead letter through
// q_jobs_archive_status_id_idx, and succeeded/cancelled only for the last hour, through the BRIN
// index on finished_at.
/** Counts of jobs per queue and status (succeeded and cancelled: the last hour only). */
export const JOB_COUNTS = statement(
  'q_dashboard_job_counts',
  `SELECT queue, status::text AS status, count(*)::int8 AS n FROM (
     SELECT queue, status FROM __q_schema__.q_jobs WHERE status = 'queued'
     UNION ALL SELECT queue, status FROM __q_schema__.q_jobs WHERE status IN ('leased', 'running')
     UNION ALL SELECT queue, status FROM __q_schema__.q_jobs WHERE status IN ('scheduled', 'retry_wait')
     UNION ALL SELECT queue, status FROM __q_schema__.q_jobs WHERE flow_id IS NOT NULL AND status = 'waiting'
     UNION ALL SELECT queue, status FROM __q_schema__.q_jobs_archive WHERE status = 'dead_letter'
     UNION ALL SELECT queue, status FROM __q_schema__.q_jobs_archive
       WHERE finished_at > now() - interval '1 hour' AND status IN ('succeeded', 'cancelled')
   ) c GROUP BY queue, status ORDER BY queue, status`,
);
