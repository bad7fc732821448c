import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';
import { runOnLeases, type HeldLeaseRow } from './lease-rows.js';

const TEXT = `
UPDATE __q_schema__.q_jobs AS jobs SET status = 'running', updated_at = now()
FROM unnest($1::int8[], $2::uuid[]) AS u(id, token)
WHERE jobs.id = ANY($1::int8[]) AND jobs.id = u.id AND jobs.lease_token = u.token AND jobs.status = 'leased'
RETURNING jobs.id, jobs.cancel_requested_at IS NOT NULL AS cancel_requested`;

const TEXT_STMT = statement('q_jobs_mark_running', TEXT);

/** leased → running for the leases still held; returns them with their cancel flag. */
export function markJobsRunning(scope: StatementScope, db: Queryable, ids: number[], tokens: string[]): Promise<HeldLeaseRow[]> {
  return runOnLeases(scope, db, TEXT_STMT, ids, tokens);
}
