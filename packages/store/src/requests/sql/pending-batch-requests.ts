import { statement, type StatementScope } from '@q/schema/internal';
import type { BatchRequestLine } from '../batch-types.js';
import { type Db } from './db.js';

export const pendingBatchRequestsStatement = statement(
  'q_store_pending_batch_requests',
  `SELECT line_no, custom_id, request_id FROM __q_schema__.q_batch_requests WHERE batch_id = $1 AND state = 0 ORDER BY line_no`,
);

/** The lines of a batch that have no result yet, with their custom ids and request-queue ids. */
export async function pendingBatchRequests(scope: StatementScope, db: Db, batchId: string): Promise<BatchRequestLine[]> {
  const { rows } = await scope.run<{ line_no: number; custom_id: string; request_id: string }>(db, pendingBatchRequestsStatement, [batchId]);
  return rows.map((r) => ({ lineNo: r.line_no, customId: r.custom_id, requestId: r.request_id }));
}
