import { statement, type StatementScope } from '@q/schema/internal';
import { jobColumns, type JobRow } from '../row.js';
import type { JobStatus } from '../types.js';
import type { Queryable } from './db.js';

// Over both tables (q_jobs_all): the planner merges the two primary keys walked backwards.
const TEXT = `
SELECT ${jobColumns('j')} FROM __q_schema__.q_jobs_all j
WHERE ($1::__q_schema__.q_job_status IS NULL OR j.status = $1::__q_schema__.q_job_status)
  AND ($2::text IS NULL OR j.queue = $2::text)
  AND ($3::text IS NULL OR j.job_type = $3::text)
  AND ($4::int8 IS NULL OR j.team_id = $4::int8)
  AND ($5::int8 IS NULL OR j.id < $5::int8)
ORDER BY j.id DESC
LIMIT $6`;

// One flow's nodes (JobStore.list with a flowId): each table read by its partial index on
// flow_id, as a flow is a few nodes among all jobs, then the same filters and order.
const FLOW_TEXT = `
SELECT ${jobColumns('j')} FROM (
  SELECT * FROM __q_schema__.q_jobs WHERE flow_id = $7::uuid
  UNION ALL
  SELECT * FROM __q_schema__.q_jobs_archive WHERE flow_id = $7::uuid
) j
WHERE ($1::__q_schema__.q_job_status IS NULL OR j.status = $1::__q_schema__.q_job_status)
  AND ($2::text IS NULL OR j.queue = $2::text)
  AND ($3::text IS NULL OR j.job_type = $3::text)
  AND ($4::int8 IS NULL OR j.team_id = $4::int8)
  AND ($5::int8 IS NULL OR j.id < $5::int8)
ORDER BY j.id DESC
LIMIT $6`;

/** Filter of {@link listJobs}; `null` means "any". */
export interface ListParams {
  /** The flow whose nodes are listed (see FLOW_TEXT), or null. */
  flowId: string | null;
  status: JobStatus | null;
  queue: string | null;
  type: string | null;
  teamId: number | null;
  beforeId: number | null;
  limit: number;
}

const TEXT_STMT = statement('q_jobs_list', TEXT);
const FLOW_STMT = statement('q_jobs_list_flow', FLOW_TEXT);

/** Jobs matching the filter, `id DESC`, at most `limit`. */
export async function listJobs(scope: StatementScope, db: Queryable, p: ListParams): Promise<JobRow[]> {
  const values = [p.status, p.queue, p.type, p.teamId, p.beforeId, p.limit];
  const { rows } = await (p.flowId === null ? scope.run<JobRow>(db, TEXT_STMT, values) : scope.run<JobRow>(db, FLOW_STMT, [...values, p.flowId]));
  return rows;
}
