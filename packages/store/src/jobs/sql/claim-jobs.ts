import { repeatedTimestamps, statement, type StatementScope } from '@q/schema/internal';
import { JOB_COLUMN_COUNT, JOB_COLUMN_NAMES, leasedJobOf, someJobColumns, type ClaimedAs } from '../row.js';
import type { ClaimedRows, ClaimStartParams } from '../claim-starts.js';
import { opaque, placeholders, type Queryable } from './db.js';

/** Placeholders of the claim's parameters inside a statement (constants, never input). */
export interface ClaimParams {
  queues: string;
  limit: string;
  workerId: string;
  leaseMs: string;
  status: string;
  /**
   * Per queue, aligned with `queues`: the dequeue position (priority, run_at, id) the claim starts
   * past, NULL for a scan from the queue's head (see claim-starts.ts).
   */
  afterPriority: string;
  afterRunAt: string;
  afterId: string;
  /** The claim's id, from which each lease token is derived. */
  claimId: string;
}

/** A candidate `j` whose lock key no leased or running job holds (the probe of both claims; see below). */
export const NOT_KEY_HELD = `(j.lock_key IS NULL OR NOT EXISTS (
        SELECT 1 FROM __q_schema__.q_jobs h
        WHERE h.lock_key = j.lock_key AND h.lock_key IS NOT NULL AND h.status IN ('leased', 'running')))`;

// The CTEs `cand` and `pick` choose up to `limit` jobs. Each queue is scanned in dequeue-index
// order by its own lateral subquery (a single scan over queue = ANY(...) could not use the index
// order and would sort every queued row), locking rows with SKIP LOCKED so concurrent claimers
// pass each other. A job is skipped while another job with its lock key is leased or running, and
// the batch keeps at most one job per lock key; two claimers can still both see a key free, in
// which case the partial unique index jobs_lock_key_active_key refuses the second (the caller
// retries at once). The probe spells out `h.lock_key IS NOT NULL` so it matches that index's
// predicate on its own. Rows locked but not picked are released when the statement commits. The
// ORDER BY spells out NULLS LAST to match jobs_dequeue_idx exactly (priority is NOT NULL, but the
// planner only uses an index for ordering when the null placement matches).
//
// A queue given a start position is read in four ranges of its index, each its own scan: the
// higher priorities whole, the position's priority past the position, then the same priority from
// its head up to the position (the jobs put or left behind it), then the lower priorities whole;
// without one (NULL), the first range is the whole queue and the others are empty. So a lower
// priority is read only once the position's priority has nothing claimable left on either side of
// the position: order across priorities is exact, only order within one is bounded. The Append
// runs the ranges lazily: the LIMIT above stops it once it has its rows, so a range after a full
// one is never read (nor a row of it locked), and the walk over the claimed prefix (the range
// behind the position) is paid only when the priority runs out past it. Why a claim starts past a
// position at all, and why that is safe, is the essay of claim-starts.ts.
export function claimRange(range: string, limit: string, columns = 'j.id, j.lock_key, j.priority, j.run_at'): string {
  return `SELECT ${columns} FROM __q_schema__.q_jobs j
      WHERE j.queue = q.name AND ${range} AND j.status = 'queued' AND j.run_at <= now()
        AND ${NOT_KEY_HELD}
      ORDER BY j.priority DESC NULLS LAST, j.run_at, j.id
      LIMIT ${limit}
      FOR UPDATE OF j SKIP LOCKED`;
}

/** What a grouped claim (claim-grouped-jobs.ts) reads of each candidate. */
export const CLAIM_COLUMNS = 'j.id, j.lock_key, j.priority, j.run_at, j.queue, j.job_type, j.job_group';

/** The `cand` and `pick` CTEs of a claim (shared with the combined complete-and-claim). */
export function claimCtes(p: ClaimParams): string {
  const limit = opaque(p.limit, 'int8');
  return `
cand AS (
  SELECT c.id, c.lock_key, c.priority, c.run_at
  FROM unnest(${opaque(p.queues, 'text[]')}, ${opaque(p.afterPriority, 'int4[]')}, ${opaque(p.afterRunAt, 'text[]')},
              ${opaque(p.afterId, 'int8[]')}) AS q(name, priority, run_at, id)
  CROSS JOIN LATERAL (
    SELECT * FROM (${claimRange('j.priority >= coalesce(q.priority::int8 + 1, -2147483648)', limit)}) above
    UNION ALL
    SELECT * FROM (${claimRange(`j.priority = q.priority AND (j.run_at, j.id) > (q.run_at::timestamp AT TIME ZONE 'UTC', q.id)`, limit)}) past
    UNION ALL
    SELECT * FROM (${claimRange(`j.priority = q.priority AND (j.run_at, j.id) <= (q.run_at::timestamp AT TIME ZONE 'UTC', q.id)`, limit)}) behind
    UNION ALL
    SELECT * FROM (${claimRange('j.priority < q.priority', limit)}) below
    LIMIT ${limit}
  ) c
), pick AS (
  SELECT r.id, r.priority, r.run_at FROM (
    SELECT cand.*, row_number() OVER (PARTITION BY lock_key ORDER BY priority DESC, run_at, id) AS rn FROM cand
  ) r
  WHERE r.lock_key IS NULL OR r.rn = 1
  ORDER BY r.priority DESC, r.run_at, r.id
  LIMIT ${limit}
)`;
}

// The columns the claimer sets to values it knows, returned NULL and filled in by leasedJobOf:
// the status and the lease holder it asked for, and the lease expiry, which is updated_at (the
// statement's now()) plus the lease. Three fewer values per row to format and parse (one a
// timestamp) on the statement a worker runs most.
const KNOWN = new Set(['status', 'leased_by', 'lease_expires_at']);
const RETURNED = someJobColumns('jobs', new Set(JOB_COLUMN_NAMES.filter((c) => !KNOWN.has(c))));

// The claim's last job in dequeue order (where the next claim may start, see claim-starts.ts)
// also carries its run_at exactly: a Date keeps milliseconds, run_at has microseconds, and the
// jobs of one batch enqueue share one run_at, so a position a millisecond early would read the
// batch's claimed entries again. In UTC, in a format whose text order is time order (the
// years a claimable run_at has: four digits) and that reads back the same whatever DateStyle.
const RUN_AT_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US';

// The claim runs on its generic plan (the queues and the limit are read through `opaque`, see
// db.ts), whose estimates know nothing of the limit: a join of the picked rows could then be
// hashed against a scan of the whole table. The picked ids are read as one array instead, which
// leaves the primary key as the only way to the rows.
/**
 * The UPDATE that leases the picked jobs, each with a fresh fencing token (`md5(claim id || job
 * id)`: unique per claim and job, and recomputable by whoever sent the claim); every row returns
 * the job columns, its lease token, and (on the claim's last job only) that job's exact run_at.
 */
export function claimUpdate(p: ClaimParams): string {
  return `
UPDATE __q_schema__.q_jobs AS jobs SET status = ${p.status}::__q_schema__.q_job_status, leased_by = ${p.workerId}, lease_token = md5(${p.claimId}::text || jobs.id::text)::uuid,
       lease_expires_at = now() + ${p.leaseMs} * interval '1 millisecond', heartbeat_at = now(),
       attempt = jobs.attempt + 1, updated_at = now(), job_key = NULL, limit_scope = NULL, limit_slot = NULL
WHERE jobs.id = ANY(ARRAY(SELECT pick.id FROM pick))
RETURNING ${claimReturning()},
  CASE WHEN jobs.id = (SELECT l.id FROM pick l ORDER BY l.priority, l.run_at DESC, l.id DESC LIMIT 1)
    THEN to_char(jobs.run_at AT TIME ZONE 'UTC', '${RUN_AT_FORMAT}') END`;
}

/** What both claims return of a leased row before their last column: the job columns and the lease token. */
export function claimReturning(): string {
  return `${RETURNED}, jobs.lease_token`;
}

/** The order {@link claimValues} sends a claim's values in (the one place it is written down for both statements that claim). */
const CLAIM_ORDER = ['queues', 'limit', 'workerId', 'leaseMs', 'status', 'afterPriority', 'afterRunAt', 'afterId', 'claimId'] as const;

/** The claim's placeholders from `$first` on (see {@link CLAIM_ORDER}). */
export function claimParams(first: number): ClaimParams {
  return placeholders(first, CLAIM_ORDER);
}

const P = claimParams(1);
const TEXT = `WITH ${claimCtes(P)}${claimUpdate(P)}`;

// Rows arrive as arrays (the job columns, the lease token, the run_at) and are mapped by position: a
// claim returns hundreds of rows of twenty-seven columns, and pg's object per row, keyed by
// column name, was a measurable part of a worker's CPU.
const TEXT_STMT = statement('q_jobs_claim', TEXT, { types: repeatedTimestamps, rowMode: 'array' });

/** What a claim asks for: the queues with where each is read from, and the lease to take. */
export interface ClaimInput {
  queues: string[];
  limit: number;
  workerId: string;
  leaseMs: number;
  status: 'leased' | 'running';
  starts: ClaimStartParams;
  /** The claim's id: each lease token is `md5(claimId || job id)` as a uuid (see `releaseClaims`). */
  claimId: string;
}

/** A claim's parameters in statement order: the queues, the limit, the lease, the start positions. */
export function claimValues(c: ClaimInput): unknown[] {
  return [c.queues, c.limit, c.workerId, c.leaseMs, c.status, c.starts.priority, c.starts.runAt, c.starts.id, c.claimId];
}

/**
 * Maps one claimed row (job columns from `at`, then the lease token and the exact run_at) into
 * `out`; the row carrying a run_at is the claim's last job.
 */
export function takeClaimedRow(v: readonly unknown[], at: number, claim: ClaimedAs, out: ClaimedRows): void {
  const job = leasedJobOf(v, at, claim);
  out.jobs.push(job);
  const runAt = v[at + JOB_COLUMN_COUNT + 1];
  if (typeof runAt === 'string') out.end = { queue: job.queue, priority: job.priority, runAt, id: job.id };
}

/**
 * Leases up to `limit` eligible jobs of `queues` for `workerId`; each gets a new fencing token.
 * `status` is `leased`, or `running` for a claimer that starts the jobs at once (saving the
 * separate mark-running write). Each queue is read past its start position (NULL: from its head).
 */
export async function claimJobs(scope: StatementScope, db: Queryable, claim: ClaimInput): Promise<ClaimedRows> {
  const { rows } = await scope.run<unknown[]>(db, TEXT_STMT, claimValues(claim));
  const out: ClaimedRows = { jobs: [], end: undefined };
  for (const v of rows) takeClaimedRow(v, 0, claim, out);
  return out;
}
