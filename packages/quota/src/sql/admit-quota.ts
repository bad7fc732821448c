import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './queryable.js';

// q_quota_admit locks the (key, window) row, so admits per key and window serialise.
const stmt = statement('q_quota_admit', `SELECT __q_schema__.q_quota_admit($1, $2::int, $3::int, $4::bigint) AS granted`);

/** Admits up to `n` units of `key` within the trailing `windowMs`, never more than `limit` per window. */
export async function admitQuota(scope: StatementScope, db: Queryable, key: string, n: number, limit: number, windowMs: number): Promise<number> {
  const { rows } = await scope.run<{ granted: number }>(db, stmt, [key, n, limit, windowMs]);
  return rows[0]?.granted ?? 0;
}
