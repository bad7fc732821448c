import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './queryable.js';

// q_quota_acquire locks the key row, so acquires on one key serialise across processes.
const stmt = statement('q_quota_acquire', `SELECT __q_schema__.q_quota_acquire($1, $2, $3::int, $4::int) AS granted`);

/** Grants up to `n` slots of `key` to `holder` under `limit`; `-1` when the holder is not live. */
export async function acquireQuotaSlots(
  scope: StatementScope,
  db: Queryable,
  holder: string,
  key: string,
  n: number,
  limit: number,
): Promise<number> {
  const { rows } = await scope.run<{ granted: number }>(db, stmt, [key, holder, n, limit]);
  return rows[0]?.granted ?? 0;
}
