import { statement, type StatementScope } from '@q/schema/internal';
import type { BatchRequestLine } from '../batch-types.js';
import { type Db } from './db.js';

export const recordBatchLinesStatement = statement(
  'q_store_record_batch_lines',
  `WITH b AS (
     UPDATE __q_schema__.q_batches SET enqueued_lines = $4
      WHERE id = $1 AND lease_owner = $2 AND enqueued_lines = $3 AND status IN ('in_progress', 'cancelling')
     RETURNING id
   ), ins AS (
     INSERT INTO __q_schema__.q_batch_requests (batch_id, line_no, custom_id, request_id)
     SELECT b.id, l.line_no, l.custom_id, l.request_id FROM b, unnest($5::int[], $6::text[], $7::text[]) AS l(line_no, custom_id, request_id)
   )
   SELECT count(*)::int AS n FROM b`,
);

/**
 * Records the request lines of input lines `from + 1 … to` of a running (or cancelling) batch `owner` holds,
 * moving its enqueue cursor from `from` to `to` (compare and set). Run in the transaction that
 * enqueues their requests; false (the caller rolls back) when the cursor was elsewhere.
 */
export async function recordBatchLines(
  scope: StatementScope,
  db: Db,
  id: string,
  owner: string,
  from: number,
  to: number,
  lines: BatchRequestLine[],
): Promise<boolean> {
  const { rows } = await scope.run<{ n: number }>(db, recordBatchLinesStatement, [
    id,
    owner,
    from,
    to,
    lines.map((l) => l.lineNo),
    lines.map((l) => l.customId),
    lines.map((l) => l.requestId),
  ]);
  return rows[0]?.n === 1;
}
