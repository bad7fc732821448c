import { statement, type StatementScope } from '@q/schema/internal';
import type { BatchRequestLine } from '../batch-types.js';
import { type Db } from './db.js';

// By primary key, only the lines asked for: a page of results costs a page of rows, not the
// batch's whole pending set.
export const pendingBatchLinesStatement = statement(
  'q_store_pending_batch_lines',
  `SELECT line_no, custom_id, request_id FROM __q_schema__.q_batch_requests
    WHERE batch_id = $1 AND line_no = ANY ($2::int[]) AND state = 0`,
);

/** Of lines `lineNos` of a batch, those without a result yet, with their custom ids and request-queue ids. */
export async function pendingBatchLines(scope: StatementScope, db: Db, batchId: string, lineNos: number[]): Promise<BatchRequestLine[]> {
  const { rows } = await scope.run<{ line_no: number; custom_id: string; request_id: string }>(db, pendingBatchLinesStatement, [
    batchId,
    lineNos,
  ]);
  return rows.map((r) => ({ lineNo: r.line_no, customId: r.custom_id, requestId: r.request_id }));
}
