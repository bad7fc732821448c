import { statement, type StatementScope } from '@q/schema/internal';
import type { JobStatus } from '../types.js';
import type { Queryable } from './db.js';

/** A parent of a flow node as its child reads it. */
export interface FlowParentRow {
  flow_ref: string | null;
  status: JobStatus;
  result: unknown;
  last_error: string | null;
}

// The parents of one node through its edges (index q_job_edges_child_idx), each read where it
// is: a parent that is done is in the archive, where its result stays for its children. Edges
// dropped by the `ignore` policy are gone, so such a parent is not listed.
const TEXT = `SELECT p.flow_ref, p.status, p.result, p.last_error
FROM __q_schema__.q_job_edges e
CROSS JOIN LATERAL (SELECT j.flow_ref, j.status, j.result, j.last_error FROM __q_schema__.q_jobs j WHERE j.id = e.parent_id
                    UNION ALL
                    SELECT a.flow_ref, a.status, a.result, a.last_error FROM __q_schema__.q_jobs_archive a WHERE a.id = e.parent_id) p
WHERE e.child_id = $1::int8`;

const TEXT_STMT = statement('q_jobs_flow_parents', TEXT);

/** The parents of the job `childId` (none for a job outside flows or without parents). */
export async function getFlowParents(scope: StatementScope, db: Queryable, childId: number): Promise<FlowParentRow[]> {
  const { rows } = await scope.run<FlowParentRow>(db, TEXT_STMT, [childId]);
  return rows;
}
