import { statement, type StatementScope } from '@q/schema/internal';
import type { Db } from './db.js';

export const ensurePartitionsStatement = statement(
  'q_store_ensure_partitions',
  `INSERT INTO __q_schema__.q_partitions (queue, partition_id)
SELECT $1, g FROM generate_series(0, $2::int - 1) AS g
ON CONFLICT (queue, partition_id) DO NOTHING`,
);

/** Creates the queue's partition rows (unowned, epoch 0) that do not exist yet. */
export async function ensurePartitionRows(scope: StatementScope, db: Db, queue: string, count: number): Promise<void> {
  await scope.run(db, ensurePartitionsStatement, [queue, count]);
}

export const releasePartitionsStatement = statement(
  'q_store_release_partitions',
  `UPDATE __q_schema__.q_partitions SET owner = '', draining = 0, lease_expires_ms = 0
 WHERE queue = $1 AND owner = $2 AND partition_id = ANY ($3::int[])`,
);

/** Releases the listed partitions `owner` holds (epoch kept; the next acquirer bumps it). */
export async function releasePartitionRows(scope: StatementScope, db: Db, queue: string, owner: string, partitions: number[]): Promise<void> {
  await scope.run(db, releasePartitionsStatement, [queue, owner, partitions]);
}

export const leaveStatement = statement(
  'q_store_leave',
  `WITH released AS (
  UPDATE __q_schema__.q_partitions SET owner = '', draining = 0, lease_expires_ms = 0
   WHERE queue = $1 AND owner = $2
)
DELETE FROM __q_schema__.q_dispatchers WHERE queue = $1 AND owner = $2`,
);

/** Releases all of `owner`'s partitions of `queue` and drops its membership, atomically. */
export async function leaveQueue(scope: StatementScope, db: Db, queue: string, owner: string): Promise<void> {
  await scope.run(db, leaveStatement, [queue, owner]);
}

export const setDrainingStatement = statement(
  'q_store_set_draining',
  `UPDATE __q_schema__.q_partitions SET draining = $4
 WHERE queue = $1 AND owner = $2 AND partition_id = ANY ($3::int[]) AND draining <> $4`,
);

/** Drains (or undrains) the listed partitions `owner` holds. */
export async function setDrainingRows(
  scope: StatementScope,
  db: Db,
  queue: string,
  owner: string,
  partitions: number[],
  draining: boolean,
): Promise<void> {
  await scope.run(db, setDrainingStatement, [queue, owner, partitions, draining ? 1 : 0]);
}
