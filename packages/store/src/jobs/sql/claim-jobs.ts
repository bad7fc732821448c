import { repeatedTimestamps, statement, type StatementScope } from '@q/schema';
import { JOB_COLUMN_NAMES, leasedJobOf, someJobColumns } from '../row.js';
import type { LeasedJob } from '../types.js';
import { opaque, type Queryable } from './db.js';

/** Placeholders of the claim's parameters inside a statement (constants, never input). */
export interface ClaimParams {
  queues: string;
  limit: string;
  workerId: string;
  leaseMs: string;
  status: string;
}

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
/** The `cand` and `pick` CTEs of a claim (shared with the combined complete-and-claim). */
export function claimCtes(p: ClaimParams): string {
  return `
cand AS (
  SELECT c.id, c.lock_key, c.priority, c.run_at
  FROM unnest(${opaque(p.queues, 'text[]')}) AS q(name)
  CROSS JOIN LATERAL (
    SELECT j.id, j.lock_key, j.priority, j.run_at FROM __q_schema__.q_jobs j
    WHERE j.queue = q.name AND j.status = 'queued' AND j.run_at <= now()
      AND (j.lock_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM __q_schema__.q_jobs h
            WHERE h.lock_key = j.lock_key AND h.lock_key IS NOT NULL AND h.status IN ('leased', 'running')))
    ORDER BY j.priority DESC NULLS LAST, j.run_at, j.id
    LIMIT ${opaque(p.limit, 'int8')}
    FOR UPDATE OF j SKIP LOCKED
  ) c
), pick AS (
  SELECT r.id FROM (
    SELECT cand.*, row_number() OVER (PARTITION BY lock_key ORDER BY priority DESC, run_at, id) AS rn FROM cand
  ) r
  WHERE r.lock_key IS NULL OR r.rn = 1
  ORDER BY r.priority DESC, r.run_at, r.id
  LIMIT ${opaque(p.limit, 'int8')}
)`;
}

// The columns the claimer sets to values it knows, returned NULL and filled in by leasedJobOf:
// the status and the lease holder it asked for, and the lease expiry, which is updated_at (the
// statement's now()) plus the lease. Three fewer values per row to format and parse (one a
// timestamp) on the statement a worker runs most.
const KNOWN = new Set(['status', 'leased_by', 'lease_expires_at']);
const RETURNED = someJobColumns('jobs', new Set(JOB_COLUMN_NAMES.filter((c) => !KNOWN.has(c))));

// The claim runs on its generic plan (the queues and the limit are read through `opaque`, see
// db.ts), whose estimates know nothing of the limit: a join of the picked rows could then be
// hashed against a scan of the whole table. The picked ids are read as one array instead, which
// leaves the primary key as the only way to the rows.
/** The UPDATE that leases the picked jobs, each with a fresh fencing token. */
export function claimUpdate(p: ClaimParams): string {
  return `
UPDATE __q_schema__.q_jobs AS jobs SET status = ${p.status}::__q_schema__.q_job_status, leased_by = ${p.workerId}, lease_token = gen_random_uuid(),
       lease_expires_at = now() + ${p.leaseMs} * interval '1 millisecond', heartbeat_at = now(),
       attempt = jobs.attempt + 1, updated_at = now()
WHERE jobs.id = ANY(ARRAY(SELECT pick.id FROM pick))
RETURNING ${RETURNED}, jobs.lease_token`;
}

const P: ClaimParams = { queues: '$1', limit: '$2', workerId: '$3', leaseMs: '$4', status: '$5' };
const TEXT = `WITH ${claimCtes(P)}${claimUpdate(P)}`;

// Rows arrive as arrays (the job columns, then the lease token) and are mapped by position: a
// claim returns hundreds of rows of twenty-seven columns, and pg's object per row, keyed by
// column name, was a measurable part of a worker's CPU.
const TEXT_STMT = statement('q_jobs_claim', TEXT, { types: repeatedTimestamps, rowMode: 'array' });

/**
 * Leases up to `limit` eligible jobs of `queues` for `workerId`; each gets a new fencing token.
 * `status` is `leased`, or `running` for a claimer that starts the jobs at once (saving the
 * separate mark-running write).
 */
export async function claimJobs(
  scope: StatementScope,
  db: Queryable,
  queues: string[],
  limit: number,
  workerId: string,
  leaseMs: number,
  status: 'leased' | 'running',
): Promise<LeasedJob[]> {
  const { rows } = await scope.run<unknown[]>(db, TEXT_STMT, [queues, limit, workerId, leaseMs, status]);
  const as = { status, workerId, leaseMs };
  return rows.map((v) => leasedJobOf(v, 0, as));
}
