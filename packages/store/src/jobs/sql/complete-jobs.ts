import { plainArrayLiteral, statement, textArrayLiteral, unnestColumn, type StatementScope } from '@q/schema';
import type { JobStatus } from '../types.js';
import type { Queryable } from './db.js';

/** Column arrays of one completion batch; index i of every array is outcome i. */
export interface CompletionBatch {
  ids: number[];
  tokens: string[];
  statuses: Array<'succeeded' | 'retry_wait' | 'dead_letter' | 'cancelled'>;
  /** JSON text, or null for SQL NULL. */
  results: Array<string | null>;
  errors: Array<string | null>;
  retryDelaysMs: Array<number | null>;
  /** JSON text of the final timeline, or null to keep the stored one. */
  steps: Array<string | null>;
}

/**
 * The batch's parameter values, in the order of {@link COMPLETION_INPUT}'s placeholders $1–$7.
 * Ids, tokens and statuses are checked before (safe integers, UUIDs, status names), so they go
 * as plain array literals, the texts (results, errors, timelines) as one `text[]` literal each;
 * a column with no value at all (no errors, no retry delays: every outcome a success) goes as
 * NULL, which the `unnest` pads.
 */
export function completionValues(b: CompletionBatch): unknown[] {
  return [
    plainArrayLiteral(b.ids),
    plainArrayLiteral(b.tokens),
    plainArrayLiteral(b.statuses),
    textColumn(b.results),
    textColumn(b.errors),
    unnestColumn(b.retryDelaysMs),
    textColumn(b.steps),
  ];
}

/** A text column of the `unnest`: NULL when empty, else one literal built by {@link textArrayLiteral}. */
function textColumn(values: ReadonlyArray<string | null>): string | null {
  return unnestColumn(values) === null ? null : textArrayLiteral(values);
}

/** The outcomes as rows `u`, from parameters $1–$7. */
export const COMPLETION_INPUT = `unnest($1::int8[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::text[])
  AS u(id, token, status, result, error, delay_ms, steps)`;

// Records many attempts' outcomes in one statement, each fenced by its lease token (in the
// UPDATE's own WHERE, so a concurrent reap is re-checked). A cancel requested while the attempt
// ran wins over its outcome. A success keeps an earlier last_error; a failure overwrites it; a
// retry waits its backoff on the database clock.
//
// A lease token exists only while its job is leased or running (every way out — complete, reap,
// release — clears it, and tokens are random), so the token match is the "still held" check. The
// WHERE deliberately has no `status IN ('leased', 'running')`: that predicate matches the partial
// index jobs_lease_expiry_idx, and the planner (whose statistics usually see few held jobs) then
// drove the join from a scan of every held job, filtering each against the whole batch — held ×
// batch comparisons. Without it, each outcome is one primary-key lookup. The `id = ANY($1)`
// restates the join as an index condition: joined to the unnest alone, the planner (which
// guesses 100 rows for it) hashed the batch against a sequential scan of the whole table once
// the batch was a few hundred outcomes.
const FINAL = `(CASE WHEN jobs.cancel_requested_at IS NOT NULL THEN 'cancelled'::__q_schema__.q_job_status ELSE u.status::__q_schema__.q_job_status END)`;

/** `UPDATE __q_schema__.q_jobs AS jobs SET … FROM <COMPLETION_INPUT> WHERE <held>`, without RETURNING. */
export const COMPLETION_UPDATE = `
UPDATE __q_schema__.q_jobs AS jobs SET
  status = ${FINAL},
  result = CASE WHEN u.status = 'succeeded' THEN u.result::jsonb ELSE jobs.result END,
  last_error = coalesce(u.error, jobs.last_error),
  run_at = CASE ${FINAL} WHEN 'retry_wait' THEN now() + u.delay_ms * interval '1 millisecond'
                         WHEN 'dead_letter' THEN now() ELSE jobs.run_at END,
  steps = coalesce(u.steps::jsonb, jobs.steps),
  finished_at = CASE WHEN ${FINAL} = 'retry_wait' THEN NULL ELSE now() END,
  dead_lettered_at = CASE ${FINAL} WHEN 'dead_letter' THEN now() WHEN 'retry_wait' THEN NULL
                                   ELSE jobs.dead_lettered_at END,
  leased_by = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
FROM ${COMPLETION_INPUT}
WHERE jobs.id = ANY($1::int8[]) AND jobs.id = u.id AND jobs.lease_token = u.token`;

// The lease token is returned (from the input: the row's own is cleared) so the caller can tell
// which outcome of a job was written: one job can appear under a stale and a current lease.
const TEXT = `${COMPLETION_UPDATE}
RETURNING jobs.id, u.token, jobs.status`;

const TEXT_STMT = statement('q_jobs_complete', TEXT);

/** A written outcome: its job, the lease token it was written under, and the job's new status. */
export interface CompletedRow {
  id: string;
  token: string;
  status: JobStatus;
}

/** Writes the outcomes whose lease is still held; returns those leases with the job's new status. */
export async function completeJobs(scope: StatementScope, db: Queryable, b: CompletionBatch): Promise<CompletedRow[]> {
  const { rows } = await scope.run<CompletedRow>(db, TEXT_STMT, completionValues(b));
  return rows;
}
