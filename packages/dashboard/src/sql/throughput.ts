import { statement } from '@q/schema/internal';

// Finished jobs of the last hour per minute, read through the BRIN index on finished_at: the
// archive grows in finished_at order, so the hour is a few block ranges at its end.
/** Jobs finished per minute over the last hour, by status; `ago` is whole minutes before now (0–59). */
export const THROUGHPUT = statement(
  'q_dashboard_throughput',
  `SELECT floor(extract(epoch FROM (now() - finished_at)) / 60)::int AS ago, status::text AS status, count(*)::int8 AS n
     FROM __q_schema__.q_jobs_archive
    WHERE finished_at > now() - interval '1 hour'
    GROUP BY 1, 2`,
);
