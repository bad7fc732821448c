import { statement, type StatementScope } from '@q/schema/internal';
import { NOW_SECONDS } from './batch-rows.js';
import { type Db } from './db.js';

export const startBatchStatement = statement(
  'q_store_start_batch',
  `UPDATE __q_schema__.q_batches SET status = 'in_progress', in_progress_at = ${NOW_SECONDS}, total = $3
    WHERE id = $1 AND lease_owner = $2 AND status = 'validating'`,
);

/** A validated batch `owner` holds goes `in_progress` with `total` request lines; false when it moved on meanwhile. */
export async function startBatch(scope: StatementScope, db: Db, id: string, owner: string, total: number): Promise<boolean> {
  const { rowCount } = await scope.run(db, startBatchStatement, [id, owner, total]);
  return (rowCount ?? 0) > 0;
}
