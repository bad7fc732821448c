import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

// A traced flow node's attempt records its span (q_flow_spans, migration 0015) and reads its
// parents' in one statement. The write is fenced by the lease token: a stale run records nothing.
// The parents' spans were written when they ran, before they finished, hence before this node's
// release: a parent run untraced, or by a build without this statement, has none and is not linked.
const TEXT = `
WITH mine AS (
  INSERT INTO __q_schema__.q_flow_spans (job_id, flow_id, traceparent)
  SELECT j.id, j.flow_id, $3::text FROM __q_schema__.q_jobs j
  WHERE j.id = $1::int8 AND j.lease_token = $2::uuid AND j.flow_id IS NOT NULL
  ON CONFLICT (job_id) DO UPDATE SET traceparent = EXCLUDED.traceparent
)
SELECT s.traceparent FROM __q_schema__.q_job_edges e JOIN __q_schema__.q_flow_spans s ON s.job_id = e.parent_id
WHERE e.child_id = $1::int8
ORDER BY e.parent_id`;

const TEXT_STMT = statement('q_jobs_flow_span', TEXT);

/** Records the span `traceparent` of the attempt holding lease (`id`, `token`); returns the spans of the node's parents. */
export async function recordFlowSpan(scope: StatementScope, db: Queryable, id: number, token: string, traceparent: string): Promise<string[]> {
  const { rows } = await scope.run<{ traceparent: string }>(db, TEXT_STMT, [id, token, traceparent]);
  return rows.map((r) => r.traceparent);
}
