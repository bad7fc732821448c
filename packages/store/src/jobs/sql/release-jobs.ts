import { statement, type StatementScope } from '@q/schema/internal';
import { MAX_NOTIFY_QUEUE_BYTES, type Queryable } from './db.js';

/** Gives the matched leases back: the statement both releases share, around their WHERE clause. */
function giveBack(match: string): string {
  return `
WITH r AS (
  UPDATE __q_schema__.q_jobs AS jobs SET
    status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'::__q_schema__.q_job_status ELSE 'queued'::__q_schema__.q_job_status END,
    finished_at = CASE WHEN cancel_requested_at IS NOT NULL THEN now() ELSE finished_at END,
    attempt = greatest(jobs.attempt - 1, 0),
    leased_by = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
  ${match}
  RETURNING jobs.id, jobs.queue, jobs.status
)
SELECT r.id, (SELECT count(*) FROM (SELECT pg_notify($3, 'q:' || d.queue)
                                     FROM (SELECT DISTINCT queue FROM r WHERE status = 'queued') d
                                     WHERE octet_length(d.queue) < ${MAX_NOTIFY_QUEUE_BYTES}) n) AS notified
FROM r`;
}

// A worker that stops gives its unfinished leases back: the job is queued again at once with the
// attempt given back (it did not fail), keeping its place in line. A requested cancel is honoured
// (the cancelled job is moved to q_jobs_archive by the table's trigger).
// The token match is the "still held" check (see complete-jobs.ts for why there is no status predicate).
const TEXT_STMT = statement(
  'q_jobs_release',
  giveBack(`FROM unnest($1::int8[], $2::uuid[]) AS u(id, token)
  WHERE jobs.id = ANY($1::int8[]) AND jobs.id = u.id AND jobs.lease_token = u.token`),
);

/** Returns held leases to the queue (attempt given back); returns the ids released. */
export async function releaseJobs(scope: StatementScope, db: Queryable, ids: number[], tokens: string[], channel: string): Promise<number[]> {
  const { rows } = await scope.run<{ id: string }>(db, TEXT_STMT, [ids, tokens, channel]);
  return rows.map((r) => Number(r.id));
}

// A claimer's reconciliation after a claim whose reply was lost (the statement may have
// committed): the leases that claim took are given back exactly as above — not a crash, the
// attempt given back — instead of being stranded until they lapse. A claim's lease tokens derive
// from its id (claim-jobs.ts), so the claimer names the lost claims and only their leases match,
// whatever other process shares the worker id. The status predicate matches the partial lease index.
const CLAIMS_STMT = statement(
  'q_jobs_release_claims',
  giveBack(`WHERE jobs.status IN ('leased', 'running') AND jobs.leased_by = $1
    AND EXISTS (SELECT 1 FROM unnest($2::text[]) AS c(id) WHERE jobs.lease_token = md5(c.id || jobs.id::text)::uuid)`),
);

/** Gives back to the queue every lease `workerId` still holds from the claims `claimIds` (attempt given back); returns the ids released. */
export async function releaseClaims(
  scope: StatementScope,
  db: Queryable,
  workerId: string,
  claimIds: string[],
  channel: string,
): Promise<number[]> {
  const { rows } = await scope.run<{ id: string }>(db, CLAIMS_STMT, [workerId, claimIds, channel]);
  return rows.map((r) => Number(r.id));
}
