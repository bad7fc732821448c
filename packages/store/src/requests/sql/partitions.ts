import { statement, type StatementScope } from '@q/schema';
import type { Lease } from '../types.js';
import { num, type Db } from './db.js';

interface LeaseRow {
  partition_id: number;
  epoch: string;
  draining: number;
}

function leases(rows: LeaseRow[]): Lease[] {
  return rows
    .map((r) => ({ partition: r.partition_id, epoch: num(r.epoch), draining: r.draining !== 0 }))
    .sort((a, b) => a.partition - b.partition);
}

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
export async function acquirePartitionRows(
  scope: StatementScope,
  db: Db,
  queue: string,
  owner: string,
  nowMs: number,
  expiresMs: number,
  limit: number,
): Promise<Lease[]> {
  const { rows } = await scope.run<LeaseRow>(db, acquirePartitionsStatement, [queue, owner, nowMs, expiresMs, limit]);
  return leases(rows);
}

// One statement: membership upsert (or withdrawal), lapsed members dropped, members counted,
// leases renewed. Sub-statements share one snapshot, so the count excludes the caller's own row
// and adds it back when it is a member.
export const heartbeatStatement = statement(
  'q_store_heartbeat',
  `WITH me AS (
  INSERT INTO __q_schema__.q_dispatchers (queue, owner, expires_ms)
  SELECT $1::text, $2::text, $4::bigint WHERE $5::boolean
  ON CONFLICT (queue, owner) DO UPDATE SET expires_ms = EXCLUDED.expires_ms
),
gone AS (
  DELETE FROM __q_schema__.q_dispatchers
   WHERE queue = $1 AND ((owner <> $2 AND expires_ms < $3) OR (owner = $2 AND NOT $5::boolean))
),
renewed AS (
  UPDATE __q_schema__.q_partitions SET lease_expires_ms = $4
   WHERE queue = $1 AND owner = $2
  RETURNING partition_id, epoch, draining
),
members AS (
  SELECT count(*)::int + (CASE WHEN $5::boolean THEN 1 ELSE 0 END) AS n
    FROM __q_schema__.q_dispatchers WHERE queue = $1 AND owner <> $2 AND expires_ms >= $3
)
SELECT m.n AS members, l.partition_id, l.epoch, l.draining FROM members m LEFT JOIN renewed l ON true`,
);

/** Renews `owner`'s leases and membership; returns its leases and the live member count. */
export async function heartbeatRows(
  scope: StatementScope,
  db: Db,
  queue: string,
  owner: string,
  nowMs: number,
  expiresMs: number,
  member: boolean,
): Promise<{ leases: Lease[]; members: number }> {
  const { rows } = await scope.run<{ members: number; partition_id: number | null; epoch: string | null; draining: number | null }>(
    db,
    heartbeatStatement,
    [queue, owner, nowMs, expiresMs, member],
  );
  const held = rows.filter((r): r is LeaseRow & { members: number } => r.partition_id !== null);
  return { leases: leases(held), members: rows[0]?.members ?? 0 };
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
