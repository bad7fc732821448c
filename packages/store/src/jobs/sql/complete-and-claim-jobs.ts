import { repeatedTimestamps, statement, type StatementScope } from '@q/schema';
import { JOB_COLUMN_COUNT } from '../row.js';
import { claimCtes, claimUpdate, type ClaimParams, type ClaimedRow } from './claim-jobs.js';
import { COMPLETION_UPDATE, completionValues, type CompletionBatch } from './complete-jobs.js';
import type { Queryable } from './db.js';

// A worker's steady-state round trip: the outcomes of the attempts that just finished (exactly
// as completeJobs writes them: $1–$7, each fenced by its lease token) and the claim of
// replacements for the freed slots (exactly as claimJobs: $8–$12), in one statement and one
// commit. Both parts read one snapshot, so they touch disjoint rows (the claim takes `queued`
// rows; an outcome matches only a held lease's token), and a lock key released by an outcome is
// still seen as held by the claim: its next job waits for the following round. The outcome part
// is durable before any replacement is visible, as with two statements. The result is one row
// per claimed job (written NULL), then one row listing the leases whose outcomes were written
// (written = how many, with their ids and tokens as two arrays; the job columns NULL). One row
// of two arrays instead of a row per outcome: a row of 30 mostly empty columns per job was a
// measurable part of the worker's parsing.
const P: ClaimParams = { queues: '$8', limit: '$9', workerId: '$10', leaseMs: '$11', status: '$12' };
const NULLS = Array.from({ length: JOB_COLUMN_COUNT + 1 }, () => 'NULL').join(', ');
const TEXT = `
WITH done AS (${COMPLETION_UPDATE}
  RETURNING jobs.id, u.token
), ${claimCtes(P)}, claimed AS (${claimUpdate(P)}
)
SELECT NULL::int8 AS written, claimed.*, NULL::int8[] AS written_ids, NULL::text[] AS written_tokens FROM claimed
UNION ALL
SELECT count(*), ${NULLS}, array_agg(done.id), array_agg(done.token::text) FROM done`;

/** What one complete-and-claim round trip did. */
export interface CompleteAndClaimRows {
  /** The leases (job id, token) whose outcomes were written (the others were fenced). */
  completed: Array<{ id: string; token: string }>;
  /** The jobs leased, in no particular order. */
  claimed: ClaimedRow[];
}

const TEXT_STMT = statement('q_jobs_complete_claim', TEXT, { types: repeatedTimestamps });

/** Writes `outcomes` and leases up to `limit` jobs of `queues`, in one statement. */
export async function completeAndClaimJobs(
  scope: StatementScope,
  db: Queryable,
  outcomes: CompletionBatch,
  claim: { queues: string[]; limit: number; workerId: string; leaseMs: number; status: 'leased' | 'running' },
): Promise<CompleteAndClaimRows> {
  const { rows } = await scope.run<ClaimedRow & WrittenColumns>(db, TEXT_STMT, [
    ...completionValues(outcomes),
    claim.queues,
    claim.limit,
    claim.workerId,
    claim.leaseMs,
    claim.status,
  ]);
  const out: CompleteAndClaimRows = { completed: [], claimed: [] };
  for (const r of rows) {
    if (r.written === null) {
      out.claimed.push(r);
      continue;
    }
    const ids = r.written_ids ?? [];
    const tokens = r.written_tokens ?? [];
    for (let i = 0; i < ids.length; i++) out.completed.push({ id: ids[i] as string, token: tokens[i] as string });
  }
  return out;
}

/** The columns of the row listing the written outcomes (NULL on the claimed rows). */
interface WrittenColumns {
  written: string | null;
  written_ids: string[] | null;
  written_tokens: string[] | null;
}
