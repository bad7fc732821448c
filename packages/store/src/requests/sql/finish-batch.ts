import { statement, type StatementScope } from '@q/schema/internal';
import type { Batch } from '../batch-types.js';
import { BATCH_COLUMNS, batchOf, NOW_SECONDS, type BatchRow } from './batch-rows.js';
import { type Db } from './db.js';

// A batch with no pending line left ends: `completed` (from in_progress or finalizing),
// `expired` or `cancelled`, with its finalizing time and the time of its end. Its output and
// error files become visible; one left empty is deleted and its id cleared.
export const finishBatchStatement = statement(
  'q_store_finish_batch',
  `WITH ready AS (
     SELECT b.id, b.output_file_id, b.error_file_id, ${NOW_SECONDS} AS now FROM __q_schema__.q_batches b
      WHERE b.id = $1 AND b.lease_owner = $2 AND b.status IN ('in_progress', 'finalizing', 'cancelling')
        AND NOT EXISTS (SELECT 1 FROM __q_schema__.q_batch_requests r WHERE r.batch_id = b.id AND r.state = 0)
   ), sealed AS (
     UPDATE __q_schema__.q_batch_files f SET status = 'processed' FROM ready r
      WHERE f.id IN (r.output_file_id, r.error_file_id) AND f.lines > 0
     RETURNING f.id
   ), dropped AS (
     DELETE FROM __q_schema__.q_batch_files f USING ready r WHERE f.id IN (r.output_file_id, r.error_file_id) AND f.lines = 0
   )
   UPDATE __q_schema__.q_batches b SET
          status = $3,
          finalizing_at = coalesce(b.finalizing_at, r.now),
          completed_at = CASE WHEN $3 = 'completed' THEN r.now END,
          expired_at = CASE WHEN $3 = 'expired' THEN r.now END,
          cancelled_at = CASE WHEN $3 = 'cancelled' THEN r.now END,
          output_file_id = (SELECT s.id FROM sealed s WHERE s.id = r.output_file_id),
          error_file_id = (SELECT s.id FROM sealed s WHERE s.id = r.error_file_id),
          lease_owner = '', lease_expires_ms = 0
     FROM ready r WHERE b.id = r.id
   RETURNING ${BATCH_COLUMNS.replace(/(^|,\s*)([a-z_]+)/g, '$1b.$2')}`,
);

/** Ends a batch `owner` holds once no line is pending; `undefined` when lines are still pending or it does not hold it. */
export async function finishBatch(
  scope: StatementScope,
  db: Db,
  id: string,
  owner: string,
  status: 'completed' | 'expired' | 'cancelled',
): Promise<Batch | undefined> {
  const { rows } = await scope.run<BatchRow>(db, finishBatchStatement, [id, owner, status]);
  return rows[0] === undefined ? undefined : batchOf(rows[0]);
}
