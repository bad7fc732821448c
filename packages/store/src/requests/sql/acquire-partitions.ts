import { statement, type StatementScope } from '@q/schema/internal';
import type { Lease } from '../types.js';
import type { Db } from './db.js';
import { leases, termValues, type LeaseRow, type LeaseTerm } from './lease-rows.js';

export const acquirePartitionsStatement = statement(
  'q_store_acquire_partitions',
  `WITH picked AS MATERIALIZED (
  SELECT partition_id FROM __q_schema__.q_partitions
   WHERE queue = $1 AND (owner = '' OR lease_expires_ms < $3)
   ORDER BY lease_expires_ms, partition_id
   LIMIT $5
     FOR UPDATE SKIP LOCKED
)
UPDATE __q_schema__.q_partitions p
   SET owner = $2, epoch = p.epoch + 1, draining = 0, lease_expires_ms = $4
  FROM picked
 WHERE p.queue = $1 AND p.partition_id = picked.partition_id AND (p.owner = '' OR p.lease_expires_ms < $3)
RETURNING p.partition_id, p.epoch, p.draining`,
);

/** Takes up to `limit` unowned or lapsed partitions, bumping their epoch. */
export async function acquirePartitionRows(scope: StatementScope, db: Db, term: LeaseTerm, limit: number): Promise<Lease[]> {
  const { rows } = await scope.run<LeaseRow>(db, acquirePartitionsStatement, [...termValues(term), limit]);
  return leases(rows);
}
