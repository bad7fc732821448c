import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './queryable.js';

// q_quota_renew share-locks the holder's key rows before it reads the clock, so a renewal
// never revives a holder that a concurrent acquire already counted as lapsed.
const stmt = statement('q_quota_renew_holder', `SELECT __q_schema__.q_quota_renew($1, $2::bigint) AS renewed`);

/** Extends a live holder's lease; false when it lapsed, is unknown or was deleted. */
export async function renewQuotaHolder(scope: StatementScope, db: Queryable, holder: string, ttlMs: number): Promise<boolean> {
  const { rows } = await scope.run<{ renewed: boolean }>(db, stmt, [holder, ttlMs]);
  return rows[0]?.renewed === true;
}
