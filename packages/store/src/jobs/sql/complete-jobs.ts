import { plainArrayLiteral, statement, textArrayLiteral, unnestColumn, type StatementScope } from '@q/schema/internal';
import { opaque, type Queryable } from './db.js';

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
export const COMPLETION_INPUT = `unnest(${opaque('$1', 'int8[]')}, ${opaque('$2', 'uuid[]')}, ${opaque('$3', 'text[]')}, ${opaque('$4', 'text[]')},
    ${opaque('$5', 'text[]')}, ${opaque('$6', 'int8[]')}, ${opaque('$7', 'text[]')})
  AS u(id, token, status, result, error, delay_ms, steps)`;

// Records many attempts' outcomes in one statement, each fenced by its lease token (in the
// DELETE's and UPDATE's own WHERE, so a concurrent reap is re-checked). A cancel requested while
// the attempt ran wins over its outcome. A success keeps an earlier last_error; a failure
// overwrites it; a retry waits its backoff on the database clock.
//
// A final outcome (succeeded, dead_letter, or a cancel) moves the job to the archive: its row is
// deleted from the hot table and written once to q_jobs_archive, in final form, from the
// DELETE's RETURNING (the row as the DELETE found it, after any concurrent change). That costs
// one dead hot tuple and one archive insert with two index entries, where an update in place
// wrote a new version of the wide row with entries in every hot index, and kept it there. A
// retry stays in the hot table (an update; a cancel requested meanwhile turns it final, and the
// table's trigger then moves it). The two parts take disjoint rows, split by the outcome given.
//
// A lease token exists only while its job is leased or running (every way out — complete, reap,
// release — clears it, and tokens are random), so the token match is the "still held" check. The
// WHERE deliberately has no `status IN ('leased', 'running')`: that predicate matches the partial
// index jobs_lease_expiry_idx, and the planner (whose statistics usually see few held jobs) then
// drove the join from a scan of every held job, filtering each against the whole batch — held ×
// batch comparisons. Without it, each outcome is one primary-key lookup. The `id = ANY(…)`
// restates the join as an index condition: joined to the unnest alone, the planner (which
// guesses 100 rows for it) hashed the batch against a sequential scan of the whole table once
// the batch was a few hundred outcomes. Every array is read through a sub-select (`opaque`, see
// db.ts), so no estimate depends on the batch and the statement keeps its generic plan: planned
// per round trip, a 500-outcome round spent about 1.5 ms planning the same primary-key scan.
const FINAL = (row: string, given: string) =>
  `(CASE WHEN ${row}.cancel_requested_at IS NOT NULL THEN 'cancelled'::__q_schema__.q_job_status ELSE ${given}::__q_schema__.q_job_status END)`;

/** The archive's columns in table order (the hot table's order: q_jobs_all is one over the other). */
const ARCHIVE_COLUMNS = `id, uuid, queue, job_type, payload, status, priority, run_at, attempt, max_attempts,
  idempotency_key, lock_key, leased_by, lease_token, lease_expires_at, heartbeat_at, cancel_requested_at, last_error,
  steps, result, retry_of_id, team_id, resource_id, correlation_id, dead_lettered_at, finished_at, created_at,
  updated_at, resume_count, snoozes, progress, job_key, job_group, limit_scope, limit_slot, flow_id, flow_ref, parents_left`;

/**
 * The CTEs that write a completion batch (parameters $1–$7), ending in `done(id, token, status)`:
 * one row per written outcome, with the lease token it was written under (from the input: the
 * row's own is cleared) and the job's new status. A list of CTEs, not a statement: data-modifying
 * CTEs must sit at the top of the statement that uses them (complete-and-claim adds its claim).
 */
export const COMPLETION_CTES = `
gone AS (
  DELETE FROM __q_schema__.q_jobs AS jobs USING ${COMPLETION_INPUT}
  WHERE jobs.id = ANY(${opaque('$1', 'int8[]')}::int8[]) AND jobs.id = u.id AND jobs.lease_token = u.token AND u.status <> 'retry_wait'
  RETURNING jobs.*, u.token AS given_token, u.status AS given_status, ${FINAL('jobs', 'u.status')} AS final, u.result AS given_result,
            u.error AS given_error, u.steps AS given_steps
), archived AS (
  INSERT INTO __q_schema__.q_jobs_archive (${ARCHIVE_COLUMNS})
  SELECT id, uuid, queue, job_type, payload, final, priority,
         CASE final WHEN 'dead_letter' THEN now() ELSE run_at END, attempt, max_attempts,
         idempotency_key, lock_key, NULL, NULL, NULL, heartbeat_at, cancel_requested_at,
         coalesce(given_error, last_error), coalesce(given_steps::jsonb, steps),
         CASE WHEN given_status = 'succeeded' THEN given_result::jsonb ELSE result END,
         retry_of_id, team_id, resource_id, correlation_id,
         CASE final WHEN 'dead_letter' THEN now() ELSE dead_lettered_at END, now(), created_at, now(), resume_count,
         snoozes, progress, job_key, job_group, limit_scope, limit_slot, flow_id, flow_ref, parents_left
  FROM gone
), waits AS (
  UPDATE __q_schema__.q_jobs AS jobs SET
    status = ${FINAL('jobs', "'retry_wait'")},
    last_error = coalesce(u.error, jobs.last_error),
    run_at = CASE WHEN jobs.cancel_requested_at IS NULL THEN now() + u.delay_ms * interval '1 millisecond' ELSE jobs.run_at END,
    steps = coalesce(u.steps::jsonb, jobs.steps),
    finished_at = CASE WHEN jobs.cancel_requested_at IS NULL THEN NULL ELSE now() END,
    dead_lettered_at = CASE WHEN jobs.cancel_requested_at IS NULL THEN NULL ELSE jobs.dead_lettered_at END,
    leased_by = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
  FROM ${COMPLETION_INPUT}
  WHERE jobs.id = ANY(${opaque('$1', 'int8[]')}::int8[]) AND jobs.id = u.id AND jobs.lease_token = u.token AND u.status = 'retry_wait'
  RETURNING jobs.id, u.token, jobs.status
), done AS (
  SELECT id, given_token AS token, final AS status FROM gone
  UNION ALL
  SELECT id, token, status FROM waits
)`;

/**
 * The `id/token` keys of the batch's leases whose outcomes `done` does not hold (fenced), as one
 * text, NULL when there are none. The batch holds each lease once (see prepareOutcomes), so input
 * minus written is the fenced; uuid text is lower case, as leaseKey writes it.
 */
export const FENCED_KEYS = `(SELECT string_agg(f.id || '/' || f.token, ',')
        FROM (SELECT u.id, u.token FROM unnest(${opaque('$1', 'int8[]')}, ${opaque('$2', 'uuid[]')}) AS u(id, token)
              EXCEPT ALL SELECT id, token FROM done) f)`;

// One row: the leases of the outcomes not written. Almost every batch writes every outcome, so the
// common answer is a NULL, not a row per outcome.
const TEXT = `WITH ${COMPLETION_CTES}
SELECT ${FENCED_KEYS} AS fenced_keys`;

const TEXT_STMT = statement('q_jobs_complete', TEXT, { rowMode: 'array' });

/**
 * Writes the outcomes whose lease is still held; returns the `leaseKey`s of the others (fenced),
 * usually none.
 */
export async function completeJobs(scope: StatementScope, db: Queryable, b: CompletionBatch): Promise<string[]> {
  const { rows } = await scope.run<unknown[]>(db, TEXT_STMT, completionValues(b));
  const keys = rows[0]?.[0];
  return typeof keys === 'string' ? keys.split(',') : [];
}
