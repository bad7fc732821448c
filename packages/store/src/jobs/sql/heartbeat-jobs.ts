import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';
import { runOnLeases, type HeldLeaseRow } from './lease-rows.js';

// The token match is the "still held" check (see complete-jobs.ts for why there is no status
// predicate: one primary-key lookup per lease instead of a scan of every held job; the
// `id = ANY($1)` keeps those lookups for large batches, see complete-jobs.ts).
const TEXT = `
UPDATE __q_schema__.q_jobs AS jobs SET heartbeat_at = now(), lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now()
FROM unnest($1::int8[], $2::uuid[]) AS u(id, token)
WHERE jobs.id = ANY($1::int8[]) AND jobs.id = u.id AND jobs.lease_token = u.token
RETURNING jobs.id, jobs.cancel_requested_at IS NOT NULL AS cancel_requested`;

const TEXT_STMT = statement('q_jobs_heartbeat', TEXT);

/** Extends the leases still held by `leaseMs`; returns them with their cancel flag. */
export function heartbeatJobs(scope: StatementScope, db: Queryable, ids: number[], tokens: string[], leaseMs: number): Promise<HeldLeaseRow[]> {
  return runOnLeases(scope, db, TEXT_STMT, ids, tokens, leaseMs);
}
