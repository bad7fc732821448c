import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

/** Inference steps failed per maintenance round at most; the rest wait for the next round. */
export const LATE_FLOW_REQUESTS_PER_ROUND = 1_000;

// Inference steps whose request's deadline (Unix seconds) passed with no result written: the node
// goes to the dead letter, and its archive triggers apply its edges' policies and withdraw the
// request (migrations 0014, 0015). The job is locked first, as everything but an ack does; a node
// an ack finishes meanwhile is left as the ack wrote it. Links whose job is not waiting (its table
// truncated) are passed over, so they cannot hold the live ones back.
const TEXT = `
WITH late AS (
  SELECT l.job_id FROM __q_schema__.q_flow_requests l
  WHERE l.deadline < extract(epoch FROM now())
    AND EXISTS (SELECT 1 FROM __q_schema__.q_jobs j WHERE j.id = l.job_id AND j.status = 'waiting')
  ORDER BY l.deadline, l.job_id
  LIMIT $1
), failed AS (
  UPDATE __q_schema__.q_jobs j SET status = 'dead_letter', last_error = 'request: the deadline passed with no result',
    dead_lettered_at = now(), finished_at = now(), updated_at = now()
  FROM late WHERE j.id = late.job_id AND j.status = 'waiting'
  RETURNING j.id
)
SELECT count(*)::int AS n FROM failed`;

const TEXT_STMT = statement('q_jobs_fail_late_flow_requests', TEXT);

/** Fails the inference steps whose deadline passed (see above); returns how many. */
export async function failLateFlowRequests(scope: StatementScope, db: Queryable, limit = LATE_FLOW_REQUESTS_PER_ROUND): Promise<number> {
  const { rows } = await scope.run<{ n: number }>(db, TEXT_STMT, [limit]);
  return rows[0]?.n ?? 0;
}
