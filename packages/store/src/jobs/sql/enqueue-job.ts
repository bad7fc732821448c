import { onlyRow, repeatedTimestamps, statement, type StatementScope } from '@q/schema/internal';
import { jobColumns, someJobColumns } from '../row.js';
import { MAX_NOTIFY_QUEUE_BYTES, type Queryable } from './db.js';
import { NEXT_JOB_ID } from './draw-job-ids.js';
import { INSERTED_COLUMNS, type EnqueueBatch, type EnqueueRow, type KeylessInsert } from './enqueue-jobs.js';

// One job: the batch statement's rules (enqueue-jobs.ts) for a single row, with scalar
// parameters. A batch of one paid for the arrays (each parameter an array literal parsed, then
// unnested), the id-drawing join, the key-order sort and the DISTINCT of the notification; the
// single enqueue is most applications' hot path and mostly waits for its commit, so those were a
// large share of it. With a key (TEXT below), the batch statement's result rows: the job inserted
// (only what the database decided, see INSERTED_COLUMNS), or the original holding its idempotency
// key in its queue and type (the key's scope, migration 0009), committed before this statement. Without one (KEYLESS), the keyless batch's report.
// The id is drawn first because the uuid stored carries it: q_job_uuid(id, $1), see
// enqueue-jobs.ts.
const NEW_ID = `(SELECT ${NEXT_JOB_ID} AS id) AS n`;

const TEXT = `
WITH ins AS (
  INSERT INTO __q_schema__.q_jobs AS j (id, uuid, queue, job_type, payload, priority, run_at, status, max_attempts,
                         idempotency_key, lock_key, team_id, resource_id, retry_of_id, job_group)
  OVERRIDING SYSTEM VALUE
  SELECT n.id, __q_schema__.q_job_uuid(n.id, $1::uuid), $2::text, $3::text, $4::jsonb, $5::int4,
          CASE WHEN $6::timestamptz > now() THEN $6::timestamptz ELSE now() END,
          CASE WHEN $6::timestamptz > now() THEN 'scheduled'::__q_schema__.q_job_status ELSE 'queued'::__q_schema__.q_job_status END,
          $7::int4, $8::text, $9::text, $10::int8, $11::int8, $12::int8, $14::text
  FROM ${NEW_ID}
  RETURNING ${[...INSERTED_COLUMNS].map((c) => `j.${c}`).join(', ')}
)
SELECT ${someJobColumns('ins', INSERTED_COLUMNS)}, true AS inserted,
       (SELECT count(*) FROM (SELECT pg_notify($13, 'q:' || ins.queue)
                              WHERE ins.status = 'queued' AND octet_length(ins.queue) < ${MAX_NOTIFY_QUEUE_BYTES}) n) AS notified
FROM ins
UNION ALL
SELECT ${jobColumns('o')}, false, 0 FROM __q_schema__.q_jobs_idempotency_keys k JOIN __q_schema__.q_jobs_all o ON o.id = k.job_id
WHERE k.scope = __q_schema__.q_idempotency_scope($2::text, $3::text, $8::text)`;

const TEXT_STMT = statement('q_jobs_enqueue_one', TEXT, { types: repeatedTimestamps });

// Without an idempotency key there is no conflict to resolve and no original to read: one INSERT
// whose RETURNING also sends the notification, and reports what the keyless batch statement does
// (enqueue-jobs.ts): the id and the statement's clock, from which the caller builds the job by the
// INSERT's own rule. Returning the nine decided columns (and the 19 NULLs of a full job row) cost
// the server about 30 µs and the client the parse of 28 fields, in a call that is mostly its
// round trip and commit.
const KEYLESS = `
INSERT INTO __q_schema__.q_jobs AS j (id, uuid, queue, job_type, payload, priority, run_at, status, max_attempts,
                       lock_key, team_id, resource_id, retry_of_id, job_group)
OVERRIDING SYSTEM VALUE
SELECT n.id, __q_schema__.q_job_uuid(n.id, $1::uuid), $2::text, $3::text, $4::jsonb, $5::int4,
       CASE WHEN $6::timestamptz > now() THEN $6::timestamptz ELSE now() END,
       CASE WHEN $6::timestamptz > now() THEN 'scheduled'::__q_schema__.q_job_status ELSE 'queued'::__q_schema__.q_job_status END,
       $7::int4, $8::text, $9::int8, $10::int8, $11::int8, $13::text
FROM ${NEW_ID}
RETURNING j.id, j.created_at AS now,
          CASE WHEN j.status = 'queued' AND octet_length(j.queue) < ${MAX_NOTIFY_QUEUE_BYTES}
               THEN (pg_notify($12, 'q:' || j.queue) IS NULL)::int ELSE 0 END AS notified`;

const KEYLESS_STMT = statement('q_jobs_enqueue_one_keyless', KEYLESS, { rowMode: 'array' });

/** Inserts job `i` of `b`, which has no idempotency key, alone (see above); reports as {@link enqueueKeylessJobs}. */
export async function enqueueKeylessJob(
  scope: StatementScope,
  db: Queryable,
  b: Omit<EnqueueBatch, 'ids'>,
  i: number,
  channel: string,
): Promise<KeylessInsert> {
  const { rows } = await scope.run<unknown[]>(db, KEYLESS_STMT, singleParams(b, i, channel, false));
  const [id, now] = onlyRow(rows, 'single keyless enqueue');
  return { ids: [Number(id)], now: now as Date, inserted: 1 };
}

/** Inserts job `i` of `b`, which has an idempotency key, alone (see above); rows as {@link enqueueJobs} returns them. */
export async function enqueueJob(
  scope: StatementScope,
  db: Queryable,
  b: Omit<EnqueueBatch, 'ids'>,
  i: number,
  channel: string,
): Promise<EnqueueRow[]> {
  const { rows } = await scope.run<EnqueueRow>(db, TEXT_STMT, singleParams(b, i, channel, true));
  return rows;
}

/** The parameters of job `i` for either statement: the keyed one has the key as $8; the group comes last. */
function singleParams(b: Omit<EnqueueBatch, 'ids'>, i: number, channel: string, keyed: boolean): unknown[] {
  const values: unknown[] = [b.uuids[i], b.queues[i], b.types[i], b.payloads[i], b.priorities[i], b.runAts[i], b.maxAttempts[i]];
  if (keyed) values.push(b.idempotencyKeys[i] ?? null);
  values.push(b.lockKeys[i], b.teamIds[i], b.resourceIds[i], b.retryOfIds[i], channel, b.groups[i] ?? null);
  return values;
}
