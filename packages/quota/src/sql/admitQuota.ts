import type { Queryable } from './queryable.js';

// async_quota_admit locks the (key, window) row, so admits per key and window serialise.
const text = `SELECT async_quota_admit($1, $2::int, $3::int, $4::bigint) AS granted`;

/** Admits up to `n` units of `key` within the trailing `windowMs`, never more than `limit` per window. */
export async function admitQuota(db: Queryable, key: string, n: number, limit: number, windowMs: number): Promise<number> {
  const { rows } = await db.query<{ granted: number }>({ name: 'q_quota_admit', text, values: [key, n, limit, windowMs] });
  return rows[0]?.granted ?? 0;
}
