// Partition ownership of a queue, grouped by owner and epoch (for `q-dispatcher status`).
import type pg from 'pg';

/** One owner's partitions of a queue. */
export interface OwnerPartitions {
  /** '' = unowned. */
  owner: string;
  partitions: number;
  draining: number;
  /** Lowest and highest epoch among them. */
  minEpoch: number;
  maxEpoch: number;
  /** Whether the lease is still valid at the database clock. */
  live: boolean;
}

const text = `
SELECT owner,
       count(*)::int AS partitions,
       count(*) FILTER (WHERE draining <> 0)::int AS draining,
       min(epoch)::int AS min_epoch,
       max(epoch)::int AS max_epoch,
       bool_or(lease_expires_ms > (extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS live
  FROM q_partitions
 WHERE queue = $1
 GROUP BY owner
 ORDER BY owner`;

/** Reads the ownership of `queue`'s partitions. */
export async function partitionOwners(db: Pick<pg.Pool, 'query'>, queue: string): Promise<OwnerPartitions[]> {
  const { rows } = await db.query<{ owner: string; partitions: number; draining: number; min_epoch: number; max_epoch: number; live: boolean | null }>({
    name: 'q_dispatcher_partition_owners',
    text,
    values: [queue],
  });
  return rows.map((r) => ({
    owner: r.owner,
    partitions: r.partitions,
    draining: r.draining,
    minEpoch: r.min_epoch,
    maxEpoch: r.max_epoch,
    live: r.live === true,
  }));
}
