import { statement, type StatementScope } from '@q/schema/internal';
import type { Batch } from '../batch-types.js';
import { BATCH_COLUMNS, batchOf, NOW_MS, type BatchRow } from './batch-rows.js';
import { type Db } from './db.js';

// Unfinished batches whose lease lapsed (or that `owner` holds already) are leased to `owner`
// until now + ttl, oldest first; a batch another live driver holds is skipped.
export const leaseBatchesStatement = statement(
  'q_store_lease_batches',
  `UPDATE __q_schema__.q_batches b SET lease_owner = $1, lease_expires_ms = ${NOW_MS} + $2
    WHERE b.id IN (
      SELECT c.id FROM __q_schema__.q_batches c
       WHERE c.status IN ('validating', 'in_progress', 'finalizing', 'cancelling')
         AND (c.lease_owner = $1 OR c.lease_expires_ms < ${NOW_MS})
       ORDER BY c.created_at, c.id LIMIT $3 FOR UPDATE SKIP LOCKED)
   RETURNING ${BATCH_COLUMNS}`,
);

/** Leases up to `limit` unfinished batches to `owner` for `ttlMs`. */
export async function leaseBatches(scope: StatementScope, db: Db, owner: string, ttlMs: number, limit: number): Promise<Batch[]> {
  const { rows } = await scope.run<BatchRow>(db, leaseBatchesStatement, [owner, ttlMs, limit]);
  return rows.map(batchOf).sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
}
