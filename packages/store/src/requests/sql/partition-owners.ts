import type { Queryable } from '@q/schema';
import { SCHEMA_TOKEN, statement, type StatementScope } from '@q/schema/internal';

/** One owner's partitions of a queue (as `q-dispatcher status` shows them). */
export interface OwnerPartitions {
  /** Lease owner; '' = unowned. */
  owner: string;
  /** How many of the queue's partitions it holds. */
  partitions: number;
  /** How many of them are draining (handing over). */
  draining: number;
  /** Lowest epoch among them. */
  minEpoch: number;
  /** Highest epoch among them. */
  maxEpoch: number;
  /** Whether the lease is still valid at the database clock. */
  live: boolean;
}

export const partitionOwnersStatement = statement(
  'q_store_partition_owners',
  `SELECT owner,
       count(*)::int AS partitions,
       count(*) FILTER (WHERE draining <> 0)::int AS draining,
       min(epoch)::int AS min_epoch,
       max(epoch)::int AS max_epoch,
       bool_or(lease_expires_ms > (extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS live
  FROM ${SCHEMA_TOKEN}.q_partitions
 WHERE queue = $1
 GROUP BY owner
 ORDER BY owner`,
);

/** The ownership of `queue`'s partitions, one row per owner. */
export async function selectPartitionOwners(scope: StatementScope, db: Queryable, queue: string): Promise<OwnerPartitions[]> {
  const { rows } = await scope.run<{
    owner: string;
    partitions: number;
    draining: number;
    min_epoch: number;
    max_epoch: number;
    live: boolean | null;
  }>(db, partitionOwnersStatement, [queue]);
  return rows.map((r) => ({
    owner: r.owner,
    partitions: r.partitions,
    draining: r.draining,
    minEpoch: r.min_epoch,
    maxEpoch: r.max_epoch,
    live: r.live === true,
  }));
}
