import type { Queryable } from './queryable.js';

// async_quota_renew share-locks the holder's key rows before it reads the clock, so a renewal
// never revives a holder that a concurrent acquire already counted as lapsed.
const text = `SELECT async_quota_renew($1, $2::bigint) AS renewed`;

/** Extends a live holder's lease; false when it lapsed, is unknown or was deleted. */
export async function renewQuotaHolder(db: Queryable, holder: string, ttlMs: number): Promise<boolean> {
  const { rows } = await db.query<{ renewed: boolean }>({ name: 'q_quota_renew_holder', text, values: [holder, ttlMs] });
  return rows[0]?.renewed === true;
}
