import { statement, type StatementScope } from '@q/schema/internal';
import { MAX_NOTIFY_QUEUE_BYTES, type Queryable } from './db.js';

// A handler's snooze (#39): the job goes back to waiting, `scheduled` until $3 ms from now on the
// database clock (`queued` at once for 0, waking idle workers), with its lease cleared and the
// attempt the claim counted given back — a snooze is not a failure, it uses no attempt — and
// `snoozes` one higher. A job already snoozed $4 times (the worker's `maxSnoozes`) is
// dead-lettered instead, saying so in `last_error` (its attempt kept, as a failure's is); a
// cancel requested meanwhile wins, as it does over any outcome. The dead-lettered or cancelled
// job is moved to q_jobs_archive by the table's trigger (migration 0006). The token match is the
// "still held" check (see complete-jobs.ts): a worker that lost its lease updates nothing. Every
// CASE sees the old row.
const LIVE = `jobs.cancel_requested_at IS NULL AND jobs.snoozes < $4::int4`;
const OVER = `jobs.cancel_requested_at IS NULL AND jobs.snoozes >= $4::int4`;

const TEXT = `
WITH s AS (
  UPDATE __q_schema__.q_jobs AS jobs SET
    status = (CASE WHEN jobs.cancel_requested_at IS NOT NULL THEN 'cancelled'
                   WHEN jobs.snoozes >= $4::int4 THEN 'dead_letter'
                   WHEN $3::int8 > 0 THEN 'scheduled' ELSE 'queued' END)::__q_schema__.q_job_status,
    run_at = CASE WHEN ${LIVE} THEN now() + $3::int8 * interval '1 millisecond' WHEN ${OVER} THEN now() ELSE jobs.run_at END,
    attempt = CASE WHEN ${LIVE} THEN greatest(jobs.attempt - 1, 0) ELSE jobs.attempt END,
    snoozes = CASE WHEN ${LIVE} THEN jobs.snoozes + 1 ELSE jobs.snoozes END,
    last_error = CASE WHEN ${OVER} THEN 'snoozed more than ' || $4::int4 || ' times' ELSE jobs.last_error END,
    dead_lettered_at = CASE WHEN ${OVER} THEN now() ELSE jobs.dead_lettered_at END,
    finished_at = CASE WHEN ${LIVE} THEN jobs.finished_at ELSE now() END,
    leased_by = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
  WHERE jobs.id = $1::int8 AND jobs.lease_token = $2::uuid
  RETURNING jobs.status, jobs.run_at, jobs.snoozes, jobs.queue
)
SELECT s.status, s.run_at, s.snoozes,
       (SELECT count(*) FROM (SELECT pg_notify($5, 'q:' || s.queue)
                              WHERE s.status = 'queued' AND octet_length(s.queue) < ${MAX_NOTIFY_QUEUE_BYTES}) n) AS notified
FROM s`;

const TEXT_STMT = statement('q_jobs_snooze', TEXT);

/** What the snooze statement wrote, or `undefined` when the lease was not held (fenced). */
export interface SnoozedRow {
  status: 'scheduled' | 'queued' | 'dead_letter' | 'cancelled';
  run_at: Date;
  snoozes: number;
}

/** Snoozes the job of a held lease for `delayMs` (see above); `undefined` when fenced. */
export async function snoozeJob(
  scope: StatementScope,
  db: Queryable,
  id: number,
  token: string,
  delayMs: number,
  maxSnoozes: number,
  channel: string,
): Promise<SnoozedRow | undefined> {
  const { rows } = await scope.run<SnoozedRow>(db, TEXT_STMT, [id, token, delayMs, maxSnoozes, channel]);
  return rows[0];
}
