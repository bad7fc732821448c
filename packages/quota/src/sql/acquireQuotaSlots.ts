import type { Queryable } from './queryable.js';

// async_quota_acquire locks the key row, so acquires on one key serialise across processes.
const text = `SELECT async_quota_acquire($1, $2, $3::int, $4::int) AS granted`;

/** Grants up to `n` slots of `key` to `holder` under `limit`; `-1` when the holder is not live. */
export async function acquireQuotaSlots(db: Queryable, holder: string, key: string, n: number, limit: number): Promise<number> {
  const { rows } = await db.query<{ granted: number }>({ name: 'q_quota_acquire', text, values: [key, holder, n, limit] });
  return rows[0]?.granted ?? 0;
}
