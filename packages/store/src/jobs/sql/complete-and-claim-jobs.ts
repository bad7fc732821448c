import { repeatedTimestamps, statement, type StatementScope } from '@q/schema/internal';
import { JOB_COLUMN_COUNT } from '../row.js';
import type { ClaimedRows } from '../claim-starts.js';
import { claimCtes, claimParams, claimUpdate, claimValues, takeClaimedRow, type ClaimInput } from './claim-jobs.js';
import { COMPLETION_CTES, FENCED_KEYS, completionValues, type CompletionBatch } from './complete-jobs.js';
import type { Queryable } from './db.js';
import {
  REFUSALS,
  groupedClaimText,
  groupedClaimValues,
  takeGroupedRow,
  takeRefusals,
  type ClaimGroupsInput,
  type GroupedClaimInput,
} from './claim-grouped-jobs.js';

// A worker's steady-state round trip: the outcomes of the attempts that just finished (exactly
// as completeJobs writes them: $1–$7, each fenced by its lease token) and the claim of
// replacements for the freed slots (exactly as claimJobs: $8–$15), in one statement and one
// commit. Both parts read one snapshot, so they touch disjoint rows (the claim takes `queued`
// rows; an outcome matches only a held lease's token), and a lock key released by an outcome is
// still seen as held by the claim: its next job waits for the following round. The outcome part
// is durable before any replacement is visible, as with two statements. The result is one row
// per claimed job (written NULL), then one row saying how many outcomes were written and listing
// the leases whose outcomes were not (fenced: `id/token` keys in one text, NULL when there are
// none; the job columns NULL). Almost every round writes every outcome, so the common answer is
// a count and a NULL: a row per outcome (30 mostly empty columns), and then a key per written
// lease, were each a measurable part of the worker's parsing and of the statement's own output.
// The batch holds each lease once (see prepareOutcomes), so input minus written is the fenced.
// A grouped claim (claim-grouped-jobs.ts) rides along the same way: its rows have the same shape,
// the last column carrying the walk number of the job's group instead of a run_at.
const P = claimParams(8);
const NULLS = Array.from({ length: JOB_COLUMN_COUNT + 2 }, () => 'NULL').join(', ');
// Its report row also lists the refusals (claim-grouped-jobs.ts, REFUSALS) after `fenced_keys`.
const text = (ctes: string, update: string, refusals: string): string => `
WITH ${COMPLETION_CTES}, ${ctes}, claimed AS (${update}
)
SELECT NULL::int8 AS written, claimed.*, NULL::text AS fenced_keys${refusals ? ', NULL::text AS refused' : ''} FROM claimed
UNION ALL
SELECT count(*), ${NULLS}, ${FENCED_KEYS}${refusals ? `, ${refusals}` : ''}
FROM done`;
const TEXT = text(claimCtes(P), claimUpdate(P), '');
const G = groupedClaimText(8);
const GROUPED_STMT = statement('q_jobs_complete_claim_grouped', text(G.ctes, G.update, REFUSALS), {
  types: repeatedTimestamps,
  rowMode: 'array',
});

/** What one complete-and-claim round trip did. */
export interface CompleteAndClaimRows {
  /** The leases whose outcomes were not written (fenced), as `leaseKey`s; the others were. */
  fenced: string[];
  /** The jobs leased, in no particular order, and the last of them in dequeue order. */
  claimed: ClaimedRows;
}

// Rows as arrays, mapped by position (see claim-jobs.ts): `written`, the job columns, the lease
// token and the last job's run_at, then `fenced_keys`.
const TEXT_STMT = statement('q_jobs_complete_claim', TEXT, { types: repeatedTimestamps, rowMode: 'array' });
const FENCED_AT = JOB_COLUMN_COUNT + 3;

/** Writes `outcomes` and leases up to `limit` jobs of `queues`, in one statement. */
export async function completeAndClaimJobs(
  scope: StatementScope,
  db: Queryable,
  outcomes: CompletionBatch,
  claim: ClaimInput,
): Promise<CompleteAndClaimRows> {
  const { rows } = await scope.run<unknown[]>(db, TEXT_STMT, [...completionValues(outcomes), ...claimValues(claim)]);
  return rowsOf(rows, (v, out) => takeClaimedRow(v, 1, claim, out));
}

/** {@link completeAndClaimJobs} with a grouped claim (claim-grouped-jobs.ts). */
export async function completeAndClaimGroupedJobs(
  scope: StatementScope,
  db: Queryable,
  outcomes: CompletionBatch,
  claim: GroupedClaimInput,
  groups: ClaimGroupsInput,
): Promise<CompleteAndClaimRows> {
  const { rows } = await scope.run<unknown[]>(db, GROUPED_STMT, [...completionValues(outcomes), ...groupedClaimValues(claim, groups)]);
  const walks = new Map<string, number>();
  const r = rowsOf(rows, (v, out) => takeGroupedRow(v, 1, claim, out, walks));
  for (const v of rows) if (v[0] !== null) takeRefusals(v[FENCED_AT + 1], r.claimed);
  return r;
}

function rowsOf(rows: readonly unknown[][], take: (v: readonly unknown[], out: ClaimedRows) => void): CompleteAndClaimRows {
  const out: CompleteAndClaimRows = { fenced: [], claimed: { jobs: [], end: undefined } };
  for (const v of rows) {
    // `written` is NULL on a claimed job's row; the report row has the count, and its
    // `fenced_keys` lists the `id/token` of each lease whose outcome was not written (NULL when
    // none; uuid text is lower case, as leaseKey writes it).
    if (v[0] === null) take(v, out.claimed);
    else if (typeof v[FENCED_AT] === 'string') out.fenced = v[FENCED_AT].split(',');
  }
  return out;
}
