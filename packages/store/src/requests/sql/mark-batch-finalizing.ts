import { statement, type StatementScope } from '@q/schema/internal';
import { NOW_SECONDS } from './batch-rows.js';
import { type Db } from './db.js';

export const markBatchFinalizingStatement = statement(
  'q_store_mark_batch_finalizing',
  `UPDATE __q_schema__.q_batches b SET status = 'finalizing', finalizing_at = ${NOW_SECONDS}
    WHERE b.id = $1 AND b.lease_owner = $2 AND b.status = 'in_progress'
      AND NOT EXISTS (SELECT 1 FROM __q_schema__.q_batch_requests r WHERE r.batch_id = b.id AND r.state = 0)`,
);

/** A running batch `owner` holds whose every line has its result goes `finalizing`; false otherwise. */
export async function markBatchFinalizing(scope: StatementScope, db: Db, id: string, owner: string): Promise<boolean> {
  const { rowCount } = await scope.run(db, markBatchFinalizingStatement, [id, owner]);
  return (rowCount ?? 0) > 0;
}
