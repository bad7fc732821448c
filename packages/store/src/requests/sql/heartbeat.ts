import { statement, type StatementScope } from '@q/schema/internal';
import type { Lease } from '../types.js';
import type { Db } from './db.js';
import { leases, termValues, type LeaseRow, type LeaseTerm } from './lease-rows.js';

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
  term: LeaseTerm,
  member: boolean,
): Promise<{ leases: Lease[]; members: number }> {
  const { rows } = await scope.run<{ members: number; partition_id: number | null; epoch: string | null; draining: number | null }>(
    db,
    heartbeatStatement,
    [...termValues(term), member],
  );
  const held = rows.filter((r): r is LeaseRow & { members: number } => r.partition_id !== null);
  return { leases: leases(held), members: rows[0]?.members ?? 0 };
}
