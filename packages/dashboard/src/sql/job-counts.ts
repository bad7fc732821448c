import { statement } from '@q/schema/internal';

// Jobs per queue and status, each read through the partial index that holds that status and
// capped at $1 + 1 rows, so the cost is bounded by the cap and not by the size of a backlog or of
// the history (an exact count of 900,000 queued jobs is a scan of 900,000 index entries however it
// is done). The queued backlog is capped per queue: its index leads with the queue, so the queues
// are found by skipping from one to the next (a recursive CTE) and each is counted up to the cap.
// The other statuses have no index that leads with the queue, so each is capped as a whole:
// `capped` says the status held more than $1 rows and its per-queue figures are those of the rows
// read (lower bounds). Succeeded and cancelled: the last hour only, through the BRIN index on
// finished_at; the dead letter through q_jobs_archive_status_id_idx; `waiting` (flow nodes)
// through q_jobs_flow_idx. Each queue's count is a LATERAL subquery, run once per queue; the
// statement's estimated cost stays under the default jit_above_cost, whose compilation alone took
// longer than the counts at 1,000,000 jobs.
/**
 * Counts of jobs per queue and status, each up to `$1` (succeeded and cancelled: the last hour);
 * `n` is at most `$1 + 1`, and `capped` marks a figure that is a lower bound.
 */
export const JOB_COUNTS = statement(
  'q_dashboard_job_counts',
  `WITH RECURSIVE queues AS (
     (SELECT queue FROM __q_schema__.q_jobs WHERE status = 'queued' ORDER BY queue LIMIT 1)
     UNION ALL
     SELECT (SELECT j.queue FROM __q_schema__.q_jobs j WHERE j.status = 'queued' AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
       FROM queues q WHERE q.queue IS NOT NULL
   ),
   queued AS (
     SELECT q.queue, 'queued'::text AS status, c.n
       FROM queues q
       CROSS JOIN LATERAL (SELECT count(*)::int8 AS n FROM (
         SELECT 1 FROM __q_schema__.q_jobs j WHERE j.status = 'queued' AND j.queue = q.queue LIMIT $1::int + 1) s) c
      WHERE q.queue IS NOT NULL
   ),
   sampled AS (
     SELECT 'active' AS grp, queue, status FROM (SELECT queue, status FROM __q_schema__.q_jobs WHERE status IN ('leased', 'running') LIMIT $1::int + 1) a
     UNION ALL SELECT 'delayed', queue, status FROM (SELECT queue, status FROM __q_schema__.q_jobs WHERE status IN ('scheduled', 'retry_wait') LIMIT $1::int + 1) d
     UNION ALL SELECT 'waiting', queue, status FROM (SELECT queue, status FROM __q_schema__.q_jobs WHERE flow_id IS NOT NULL AND status = 'waiting' LIMIT $1::int + 1) w
     UNION ALL SELECT 'dead', queue, status FROM (SELECT queue, status FROM __q_schema__.q_jobs_archive WHERE status = 'dead_letter' LIMIT $1::int + 1) x
     UNION ALL SELECT 'hour', queue, status FROM (SELECT queue, status FROM __q_schema__.q_jobs_archive
                WHERE finished_at > now() - interval '1 hour' AND status IN ('succeeded', 'cancelled') LIMIT $1::int + 1) h
   )
   SELECT queue, status, n, n > $1::int AS capped FROM queued
   UNION ALL
   SELECT queue, status, n, sum(n) OVER (PARTITION BY grp) > $1::int AS capped FROM (
     SELECT grp, queue, status::text AS status, count(*)::int8 AS n FROM sampled GROUP BY grp, queue, status
   ) g
   ORDER BY 1, 2`,
);
