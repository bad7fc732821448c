import { statement, type StatementScope } from '@q/schema/internal';
import type { Batch } from '../batch-types.js';
import { BATCH_COLUMNS, batchOf, NOW_SECONDS, type BatchRow } from './batch-rows.js';
import { type Db } from './db.js';

// A validating or running batch moves to `cancelling` (its driver cancels what is not yet
// dispatched and waits for what is); a batch in any other status is returned as it is.
export const cancelBatchStatement = statement(
  'q_store_cancel_batch',
  `WITH moved AS (
     UPDATE __q_schema__.q_batches SET status = 'cancelling', cancelling_at = ${NOW_SECONDS}
      WHERE id = $1 AND tenant = $2 AND status IN ('validating', 'in_progress')
     RETURNING ${BATCH_COLUMNS}
   )
   SELECT * FROM moved
   UNION ALL
   SELECT ${BATCH_COLUMNS} FROM __q_schema__.q_batches WHERE id = $1 AND tenant = $2 AND NOT EXISTS (SELECT 1 FROM moved)`,
);

/** Asks the tenant's batch to cancel; the batch after the call, or `undefined` when the tenant has none of that id. */
export async function cancelBatch(scope: StatementScope, db: Db, tenant: string, id: string): Promise<Batch | undefined> {
  const { rows } = await scope.run<BatchRow>(db, cancelBatchStatement, [id, tenant]);
  return rows[0] === undefined ? undefined : batchOf(rows[0]);
}
