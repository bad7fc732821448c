import { statement, type StatementScope } from '@q/schema/internal';
import { DB_NOW_MS, type Queryable } from './queryable.js';

// Rows in use right now (a renewal, an acquire marking them lapsed) are skipped, left for the
// next reap: reaps never wait for, or deadlock with, those statements or each other.
const stmt = statement(
  'q_quota_reap_holders',
  `
WITH gone AS (
  DELETE FROM __q_schema__.q_quota_holders WHERE holder IN (
    SELECT holder FROM __q_schema__.q_quota_holders WHERE expires_ms < ${DB_NOW_MS} - $1::bigint FOR UPDATE SKIP LOCKED
  ) RETURNING holder
), slots AS (
  DELETE FROM __q_schema__.q_quota_slots WHERE holder IN (SELECT holder FROM gone)
)
SELECT count(*)::int AS n FROM gone`,
);

/** Deletes holders lapsed for longer than `graceMs`, with their slot rows; returns how many. */
export async function reapQuotaHolders(scope: StatementScope, db: Queryable, graceMs: number): Promise<number> {
  const { rows } = await scope.run<{ n: number }>(db, stmt, [graceMs]);
  return rows[0]?.n ?? 0;
}
