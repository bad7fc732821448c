import {
  onlyRow,
  plainArrayLiteral,
  repeatedTimestamps,
  statement,
  textArrayLiteral,
  unnestColumn,
  type StatementScope,
} from '@q/schema/internal';
import { jobColumns, someJobColumns, type JobRow } from '../row.js';
import { MAX_NOTIFY_QUEUE_BYTES, type Queryable } from './db.js';
import { NEXT_JOB_ID } from './draw-job-ids.js';

/** Column arrays of one enqueue batch; index i of every array is job i. */
export interface EnqueueBatch {
  /**
   * Random uuids, one per job: the statement stores `q_job_uuid(id, uuid)`, the job's id followed
   * by this uuid's last 62 random bits (see jobUuid), so the tail of a stored uuid tells which
   * input it came from.
   */
  uuids: string[];
  queues: string[];
  types: string[];
  payloads: string[];
  priorities: number[];
  runAts: Array<Date | null>;
  maxAttempts: number[];
  idempotencyKeys: Array<string | null>;
  lockKeys: Array<string | null>;
  teamIds: Array<number | null>;
  resourceIds: Array<number | null>;
  retryOfIds: Array<number | null>;
  /** The jobs' groups (null: none). */
  groups: Array<string | null>;
  /** Ids drawn beforehand (a batch split over several statements), or null: drawn by the statement. */
  ids: Array<number | null>;
  /**
   * The job keys, when any job has one (absent otherwise: the keyless path never looks at it);
   * null for a job without. See ops/enqueue.ts (enqueueWithJobKeys).
   */
  jobKeys?: Array<JobKeyed | null>;
}

/** A job's checked job key, its mode and (mode throttle) its window in ms. */
export interface JobKeyed {
  key: string;
  mode: 'replace' | 'debounce' | 'throttle';
  throttleMs: number;
}

/**
 * Rows inserted, plus the stored originals of the batch's idempotency keys. An inserted row
 * carries only {@link INSERTED_COLUMNS} (the other columns are NULL: they are the batch's input
 * or the table's defaults, see ops/enqueue.ts); an original carries every column.
 */
export interface EnqueueRow extends JobRow {
  inserted: boolean;
}

/**
 * What the database decides for a new job: its id, the status and run_at the database clock
 * chose, the timestamps, and the payload as jsonb normalised it (key order). The rest of the row
 * is the input or a column default, which a parse of 27 columns per job would only read back.
 */
export const INSERTED_COLUMNS: ReadonlySet<string> = new Set([
  'id',
  'uuid',
  'queue',
  'payload',
  'status',
  'run_at',
  'idempotency_key',
  'created_at',
  'updated_at',
]);

// One statement per batch. The database clock decides queued vs scheduled, so a queued job is
// eligible at once whatever the producer's clock says. Idempotency conflicts are skipped (the
// table's trigger q_jobs_before_insert claims each key in q_jobs_idempotency_keys, which spans
// live and archived jobs, and skips a row whose key is held) and the originals, live or
// archived, returned by the second branch (rows committed before this statement; a duplicate key
// inside the batch resolves to the row the first branch inserted). A key is held per queue and
// job type: the key table is keyed by q_idempotency_scope(queue, job_type, key) (migration 0009). Idle workers are woken with one
// notification per queue that received a queued job; it is delivered at commit.
//
// Rows are inserted in idempotency-key order (byte order of the key, then of the queue and the
// type, which with it make the scope; keyless rows last): a key another
// transaction inserted but has not committed makes this one wait for it, and two batches taking
// the same keys in different orders would each wait for the other (a deadlock). In one key order
// a transaction only ever waits for a key above all it holds, so no cycle can form. The ids are
// drawn first, in input order, so the order of the batch (its FIFO) is kept all the same; a batch
// split over several statements brings ids drawn for the whole batch (see JobStore.enqueue).
//
// Four columns are usually one value for the whole batch (its queue, its type, the default
// priority and attempt limit): such a column comes as a one-element array, which the unnest pads
// with NULL, and `input` reads the NULL as that first element (none of the four is ever NULL in a
// job). Otherwise the column comes whole and the coalesce never applies. That spares the
// statement parsing, and the store building, four arrays of a thousand equal elements.
//
// A queue name pg_notify cannot carry (its payload stays under 8,000 bytes) is not notified:
// enqueue bounds queue names far below that, but a row written otherwise must not fail the
// statement; its workers still find the job by polling.

/**
 * The `input` and `ins` CTEs of both batch statements ($1–$12, $14); `ins` returns `returning`.
 * `keyOrdered`: rows go in in idempotency-key order (see above); a keyless batch has no key to
 * wait on, so it inserts in input order without sorting.
 */
function insertCtes(returning: string, keyOrdered: boolean): string {
  return `input AS (
  SELECT i.uuid, coalesce(i.queue, ($2::text[])[1]) AS queue, coalesce(i.job_type, ($3::text[])[1]) AS job_type, i.payload,
         coalesce(i.priority, ($5::int4[])[1]) AS priority, i.run_at, coalesce(i.max_attempts, ($7::int4[])[1]) AS max_attempts,
         i.idempotency_key, i.lock_key, i.team_id, i.resource_id, i.retry_of_id, i.job_group, i.ord, coalesce(i.given_id, ${NEXT_JOB_ID}) AS id
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::int4[], $6::timestamptz[],
              $7::int4[], $8::text[], $9::text[], $10::int8[], $11::int8[], $12::int8[], $14::int8[], $16::text[])
    WITH ORDINALITY AS i(uuid, queue, job_type, payload, priority, run_at, max_attempts, idempotency_key,
                         lock_key, team_id, resource_id, retry_of_id, given_id, job_group, ord)
), ins AS (
  INSERT INTO __q_schema__.q_jobs AS j (id, uuid, queue, job_type, payload, priority, run_at, status, max_attempts,
                         idempotency_key, lock_key, team_id, resource_id, retry_of_id, job_group)
  OVERRIDING SYSTEM VALUE
  SELECT id, __q_schema__.q_job_uuid(id, uuid), queue, job_type, payload::jsonb, priority,
         CASE WHEN run_at > now() THEN run_at ELSE now() END,
         CASE WHEN run_at > now() THEN 'scheduled'::__q_schema__.q_job_status ELSE 'queued'::__q_schema__.q_job_status END,
         max_attempts, idempotency_key, lock_key, team_id, resource_id, retry_of_id, job_group
  FROM input${keyOrdered ? ' ORDER BY idempotency_key COLLATE "C" NULLS LAST, queue COLLATE "C", job_type COLLATE "C", ord' : ''}
  RETURNING ${returning}
)`;
}

/**
 * How many notifications the statement sent ($13): one per queue of `ins` that received a queued
 * job. The batch's distinct queue names come as $15, so each needs only to find one queued row of
 * its own (usually the first), where a DISTINCT over the inserted rows sorted them all.
 */
const NOTIFIED = `(SELECT count(*) FROM (SELECT pg_notify($13, 'q:' || d.name)
                              FROM unnest($15::text[]) AS d(name)
                              WHERE octet_length(d.name) < ${MAX_NOTIFY_QUEUE_BYTES}
                                AND EXISTS (SELECT 1 FROM ins WHERE ins.queue = d.name AND ins.status = 'queued')) n)`;

const TEXT = `
WITH ${insertCtes([...INSERTED_COLUMNS].map((c) => `j.${c}`).join(', '), true)}
SELECT ${someJobColumns('ins', INSERTED_COLUMNS)}, true AS inserted, ${NOTIFIED} AS notified
FROM ins
UNION ALL
SELECT ${jobColumns('o')}, false, 0 FROM __q_schema__.q_jobs_idempotency_keys k JOIN __q_schema__.q_jobs_all o ON o.id = k.job_id
WHERE k.scope IN (SELECT __q_schema__.q_idempotency_scope(queue, job_type, idempotency_key) FROM input WHERE idempotency_key IS NOT NULL)`;

const TEXT_STMT = statement('q_jobs_enqueue', TEXT, { types: repeatedTimestamps });

/** Inserts a batch (`unnest`), skipping idempotency conflicts; notifies `channel` for queued jobs. */
export async function enqueueJobs(scope: StatementScope, db: Queryable, b: EnqueueBatch, channel: string): Promise<EnqueueRow[]> {
  const { rows } = await scope.run<EnqueueRow>(db, TEXT_STMT, batchValues(b, channel));
  return rows;
}

// A batch without idempotency keys (most batches): no conflict to resolve and no original to read
// back, so the statement returns one row, not one per job: its ids, the statement's now() and how
// many rows went in. The caller builds each job from its input and that clock, by the same rule
// the INSERT applies (queued at now() unless runAt is later), so the jobs are those the rows
// hold; their payload is the JSON text sent, parsed. Per-row results were most of a batch
// enqueue's own CPU: 1,000 rows of nine columns parsed, then completed from the input all the
// same. It inserts as the statement above does, from the same parameters (the key column is NULL:
// every key is).
//
// The ids: `input` draws them in input order, and unless another session drew ids meanwhile they
// are consecutive. `span` checks that (id − ord is the same on every row) in one pass, and then
// the first id says them all; otherwise the ids come as one text in input order (sorted by ord:
// the ELSE branch's sub-select runs only when reached).
const KEYLESS = `
WITH ${insertCtes('j.queue, j.status', false)},
span AS (SELECT min(id - ord) AS lo, max(id - ord) AS hi FROM input)
SELECT span.lo + 1 AS first_id,
       CASE WHEN span.lo = span.hi THEN NULL ELSE (SELECT string_agg(id::text, ',' ORDER BY ord) FROM input) END AS ids,
       now() AS now, (SELECT count(*)::int FROM ins) AS inserted, ${NOTIFIED} AS notified
FROM span`;

const KEYLESS_STMT = statement('q_jobs_enqueue_keyless', KEYLESS);

/** What a keyless batch insert reports: the ids in input order, the statement's clock, the rows written. */
export interface KeylessInsert {
  ids: number[];
  now: Date;
  inserted: number;
}

/** Inserts a batch without idempotency keys (`b.idempotencyKeys` all null); see {@link KEYLESS}. */
export async function enqueueKeylessJobs(scope: StatementScope, db: Queryable, b: EnqueueBatch, channel: string): Promise<KeylessInsert> {
  const { rows } = await scope.run<{ first_id: string | null; ids: string | null; now: Date; inserted: number }>(
    db,
    KEYLESS_STMT,
    batchValues(b, channel),
  );
  const r = onlyRow(rows, 'keyless enqueue');
  let ids: number[];
  if (r.ids !== null) ids = r.ids.split(',').map(Number);
  else if (r.first_id === null) ids = [];
  else {
    const first = Number(r.first_id);
    ids = b.uuids.map((_, i) => first + i);
  }
  return { ids, now: r.now, inserted: r.inserted };
}

/**
 * The parameters of both batch statements, $1–$16 ($15: the batch's distinct queues, $16 the groups). The uuids
 * are q's own (randomUUID: the random part of each stored uuid) and the priorities and attempt
 * limits checked integers, so plain literals; the texts one literal each (see textArrayLiteral).
 * The queues, types, priorities and attempt limits go as one element when the whole batch has one
 * value (see uniformColumn); the optional columns most batches leave empty go as NULL. The unnest
 * pads both.
 */
function batchValues(b: EnqueueBatch, channel: string): unknown[] {
  return [
    plainArrayLiteral(b.uuids),
    textArrayLiteral(uniformColumn(b.queues)),
    textArrayLiteral(uniformColumn(b.types)),
    textArrayLiteral(b.payloads),
    plainArrayLiteral(uniformColumn(b.priorities)),
    unnestColumn(b.runAts),
    plainArrayLiteral(uniformColumn(b.maxAttempts)),
    unnestColumn(b.idempotencyKeys),
    unnestColumn(b.lockKeys),
    unnestColumn(b.teamIds),
    unnestColumn(b.resourceIds),
    unnestColumn(b.retryOfIds),
    channel,
    unnestColumn(b.ids),
    textArrayLiteral([...new Set(b.queues)]),
    unnestColumn(b.groups),
  ];
}

/**
 * A column of a NOT NULL value as the batch statements take it: one element when every job has
 * the same (`input` reads the unnest's padding NULLs as it), else every value.
 */
function uniformColumn<T>(values: readonly T[]): readonly T[] {
  const first = values[0];
  for (let i = 1; i < values.length; i++) if (values[i] !== first) return values;
  return values.slice(0, 1);
}
