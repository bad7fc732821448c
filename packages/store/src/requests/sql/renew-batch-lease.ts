import { statement, type StatementScope } from '@q/schema/internal';
import { NOW_MS } from './batch-rows.js';
import { type Db } from './db.js';

export const renewBatchLeaseStatement = statement(
  'q_store_renew_batch_lease',
  `UPDATE __q_schema__.q_batches SET lease_expires_ms = ${NOW_MS} + $3
    WHERE id = $1 AND lease_owner = $2 AND status IN ('validating', 'in_progress', 'finalizing', 'cancelling')`,
);

/** Extends `owner`'s lease of an unfinished batch to now + `ttlMs`; false when it no longer holds it. */
export async function renewBatchLease(scope: StatementScope, db: Db, id: string, owner: string, ttlMs: number): Promise<boolean> {
  const { rowCount } = await scope.run(db, renewBatchLeaseStatement, [id, owner, ttlMs]);
  return (rowCount ?? 0) > 0;
}
