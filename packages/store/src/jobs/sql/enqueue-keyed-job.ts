import { onlyRow, repeatedTimestamps, statement, type StatementScope } from '@q/schema/internal';
import { jobColumns, type JobRow } from '../row.js';
import { MAX_NOTIFY_QUEUE_BYTES, type Queryable } from './db.js';
import { NEXT_JOB_ID } from './draw-job-ids.js';
import type { EnqueueBatch } from './enqueue-jobs.js';

// One job with a job key of mode replace or debounce (migration 0010): an INSERT fenced by the
// partial unique index q_jobs_job_key_pending_key, which covers the pending jobs (queued or
// scheduled) holding a key, per queue and type. With no pending job holding the key the job is
// inserted; with one, that job is updated instead (the conflict is resolved by the index, so two
// concurrent enqueues of one key make one job: the second waits for the first and then updates
// it). replace takes the new payload, priority and runAt (and the status runAt gives); debounce
// keeps the pending job's runAt and status. A job being claimed is locked by the claim: the update
// waits for it, and once the claim commits the job is no longer pending (the claim cleared its
// key), so a new job is inserted after it. `inserted` is whether the row is new (xmax = 0: no
// update touched it). A queued result notifies its queue's workers.
function text(debounce: boolean): string {
  const timing = debounce ? '' : `, run_at = EXCLUDED.run_at, status = EXCLUDED.status`;
  return `
WITH up AS (
  INSERT INTO __q_schema__.q_jobs AS j (id, uuid, queue, job_type, payload, priority, run_at, status, max_attempts,
                         job_key, lock_key, team_id, resource_id, retry_of_id, job_group)
  OVERRIDING SYSTEM VALUE
  SELECT n.id, __q_schema__.q_job_uuid(n.id, $1::uuid), $2::text, $3::text, $4::jsonb, $5::int4,
          CASE WHEN $6::timestamptz > now() THEN $6::timestamptz ELSE now() END,
          CASE WHEN $6::timestamptz > now() THEN 'scheduled'::__q_schema__.q_job_status ELSE 'queued'::__q_schema__.q_job_status END,
          $7::int4, $8::text, $9::text, $10::int8, $11::int8, $12::int8, $14::text
  FROM (SELECT ${NEXT_JOB_ID} AS id) AS n
  ON CONFLICT (__q_schema__.q_idempotency_scope(queue, job_type, job_key))
    WHERE job_key IS NOT NULL AND idempotency_key IS NULL AND status IN ('queued', 'scheduled')
  DO UPDATE SET payload = EXCLUDED.payload, priority = EXCLUDED.priority${timing}, updated_at = now()
  RETURNING ${jobColumns('j')}, (j.xmax = 0) AS inserted
)
SELECT up.*, (SELECT count(*) FROM (SELECT pg_notify($13, 'q:' || up.queue)
                                    WHERE up.status = 'queued' AND octet_length(up.queue) < ${MAX_NOTIFY_QUEUE_BYTES}) n) AS notified
FROM up`;
}

const REPLACE_STMT = statement('q_jobs_enqueue_keyed_replace', text(false), { types: repeatedTimestamps });
const DEBOUNCE_STMT = statement('q_jobs_enqueue_keyed_debounce', text(true), { types: repeatedTimestamps });

/** The job row an enqueue with a job key wrote, and whether it inserted it. */
export interface KeyedRow extends JobRow {
  inserted: boolean;
}

/** Inserts job `i` of `b` (job key `key`, mode replace or debounce), or updates the pending job holding the key. */
export async function enqueueKeyedJob(
  scope: StatementScope,
  db: Queryable,
  b: Omit<EnqueueBatch, 'ids'>,
  i: number,
  key: string,
  debounce: boolean,
  channel: string,
): Promise<KeyedRow> {
  const values: unknown[] = [b.uuids[i], b.queues[i], b.types[i], b.payloads[i], b.priorities[i], b.runAts[i], b.maxAttempts[i], key];
  values.push(b.lockKeys[i], b.teamIds[i], b.resourceIds[i], b.retryOfIds[i], channel, b.groups[i] ?? null);
  const { rows } = await scope.run<KeyedRow>(db, debounce ? DEBOUNCE_STMT : REPLACE_STMT, values);
  return onlyRow(rows, 'keyed enqueue');
}
