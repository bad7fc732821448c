import { statement, type StatementScope } from '@q/schema/internal';
import { type Db } from './db.js';

export const pendingBatchRequestsStatement = statement(
  'q_store_pending_batch_requests',
  `SELECT line_no, request_id FROM __q_schema__.q_batch_requests WHERE batch_id = $1 AND state = 0 ORDER BY line_no`,
);

/** The request-queue ids of a batch's lines that have no result yet (to cancel them). */
export async function pendingBatchRequests(scope: StatementScope, db: Db, batchId: string): Promise<{ lineNo: number; requestId: string }[]> {
  const { rows } = await scope.run<{ line_no: number; request_id: string }>(db, pendingBatchRequestsStatement, [batchId]);
  return rows.map((r) => ({ lineNo: r.line_no, requestId: r.request_id }));
}
