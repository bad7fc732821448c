// Enqueueing jobs: statement sizing, key-ordered chunks across a transaction, idempotency-key
// resolution, job keys and the caller's-transaction path.
import { randomUUID } from 'node:crypto';
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import { at, withTransaction } from '@q/schema/internal';
import { checkInTransaction, inCallerTransaction, type InTransaction, type TransactionClient } from '../../transaction.js';
import { STATEMENT_TEXT_BUDGET, chunkIndices, keyOrder, retryDeadlock } from '../batches.js';
import { transactionWriteError } from '../from-pool.js';
import { THROTTLE_SLOT_PREFIX, shownKeys, toJob } from '../row.js';
import type { Queryable } from '../sql/db.js';
import { dbNow } from '../sql/db-now.js';
import { drawJobIds } from '../sql/draw-job-ids.js';
import { enqueueJob, enqueueKeylessJob } from '../sql/enqueue-job.js';
import { enqueueKeyedJob } from '../sql/enqueue-keyed-job.js';
import { enqueueJobs, enqueueKeylessJobs, type EnqueueBatch, type EnqueueRow } from '../sql/enqueue-jobs.js';
import { getJobsByIdempotencyKey, type ScopedKey } from '../sql/get-jobs-by-idempotency-key.js';
import type { EnqueueResult, Job, NewJob } from '../types.js';
import { checkCallSize, toEnqueueBatch } from '../validate.js';
import { jobUuid, uuidTail } from '../uuid.js';
import { mapWriteError, type JobStoreContext } from './context.js';

/** Jobs per enqueue statement; larger batches are split, in one transaction. */
export const ENQUEUE_CHUNK = 2_000;

/** The jobs of an enqueue in input order, and for each whether this call inserted it. */
export interface Enqueued {
  jobs: Job[];
  /** `created[i]`: job i was inserted by this call (false: an idempotency key returned its holder). */
  created: boolean[];
}

/** `JobStore.enqueue`: the jobs of {@link enqueueWithFlags}. */
export async function enqueue(ctx: JobStoreContext, jobs: readonly NewJob[], tx?: InTransaction): Promise<Job[]> {
  return (await enqueueWithFlags(ctx, jobs, tx)).jobs;
}

/** `JobStore.enqueueResults`: each job of {@link enqueueWithFlags} with whether it was created. */
export async function enqueueResults(ctx: JobStoreContext, jobs: readonly NewJob[], tx?: InTransaction): Promise<EnqueueResult[]> {
  const { jobs: out, created } = await enqueueWithFlags(ctx, jobs, tx);
  return out.map((job, i) => ({ job, created: at(created, i) }));
}

/** Checks the batch, sizes its statements, writes it through the pool or the caller's transaction. */
async function enqueueWithFlags(ctx: JobStoreContext, jobs: readonly NewJob[], tx?: InTransaction): Promise<Enqueued> {
  if (!Array.isArray(jobs)) throw invalidArgument('jobs must be an array');
  const client = tx === undefined ? undefined : checkInTransaction('enqueue', tx);
  const batch = toEnqueueBatch(jobs);
  if (jobs.length === 0) return { jobs: [], created: [] };
  if (batch.jobKeys) {
    // Throttled jobs become idempotent ones (their window's slot key); replace/debounce take their own path.
    await resolveThrottleSlots(ctx, client ?? ctx.pool, batch);
    if (batch.jobKeys) return enqueueWithJobKeys(ctx, batch, client);
  }
  const sizes = batch.payloads.map((p) => p.length);
  const total = checkCallSize('enqueue', 'payload JSON', sizes);
  const fitsOne = jobs.length <= ENQUEUE_CHUNK && total <= STATEMENT_TEXT_BUDGET;
  // One statement orders its rows itself; several are given them in key order.
  const chunks = fitsOne ? [] : chunkIndices(keyOrder(batch.idempotencyKeys, batch.queues, batch.types), sizes, ENQUEUE_CHUNK);
  if (client) return enqueueThrough(ctx, client, batch, fitsOne ? null : chunks);
  return ctx.op(
    'enqueue',
    () =>
      retryDeadlock(async () => {
        if (fitsOne) return enqueueChunk(ctx, ctx.pool, batch, null);
        return withTransaction(ctx.pool, (client) => enqueueChunks(ctx, client, batch, chunks));
      }),
    { 'job.count': jobs.length },
  );
}

/** A batch split over several statements on one connection: ids drawn in input order, rows inserted in key order. */
async function enqueueChunks(
  ctx: JobStoreContext,
  client: Queryable,
  batch: ReturnType<typeof toEnqueueBatch>,
  chunks: number[][],
): Promise<Enqueued> {
  const n = batch.uuids.length;
  const ids = await drawJobIds(ctx.scope, client, n);
  const out: Enqueued = { jobs: new Array<Job>(n), created: new Array<boolean>(n) };
  for (const chunk of chunks) {
    const got = await enqueueChunk(ctx, client, { ...batch, ids }, chunk);
    chunk.forEach((pos, k) => {
      out.jobs[pos] = at(got.jobs, k);
      out.created[pos] = at(got.created, k);
    });
  }
  return out;
}

/**
 * Writes through the caller's connection, inside its transaction and behind a savepoint: the
 * same statements as {@link JobStore.enqueue}, in the same key order (`chunks` null = one
 * statement). No deadlock retry here: a deadlock belongs to the caller's transaction.
 */
function enqueueThrough(
  ctx: JobStoreContext,
  client: Queryable,
  batch: ReturnType<typeof toEnqueueBatch>,
  chunks: number[][] | null,
): Promise<Enqueued> {
  const n = batch.uuids.length;
  return ctx.op(
    'enqueue',
    async () => {
      try {
        return await inCallerTransaction('enqueue', client, async () => {
          // Every statement names the store's schema: the client's search_path does not matter.
          if (chunks === null) return enqueueChunk(ctx, client, batch, null);
          return enqueueChunks(ctx, client, batch, chunks);
        });
      } catch (err) {
        throw transactionWriteError(err);
      }
    },
    { 'job.count': n, 'job.in_transaction': true },
  );
}

/** Inserts the jobs at `indices` of `b` (all, ids drawn by the statement, when null); returns them in that order. */
async function enqueueChunk(
  ctx: JobStoreContext,
  db: Queryable,
  b: ReturnType<typeof toEnqueueBatch>,
  indices: number[] | null,
): Promise<Enqueued> {
  const pick = <T>(a: T[]) => (indices === null ? a : indices.map((i) => at(a, i)));
  const chunk = {
    uuids: pick(b.uuids),
    queues: pick(b.queues),
    types: pick(b.types),
    payloads: pick(b.payloads),
    priorities: pick(b.priorities),
    runAts: pick(b.runAts),
    maxAttempts: pick(b.maxAttempts),
    idempotencyKeys: pick(b.idempotencyKeys),
    lockKeys: pick(b.lockKeys),
    teamIds: pick(b.teamIds),
    resourceIds: pick(b.resourceIds),
    retryOfIds: pick(b.retryOfIds),
    groups: pick(b.groups),
    ids: indices === null ? b.uuids.map(() => null) : pick(b.ids),
  };
  if (chunk.idempotencyKeys.every((k) => k === null)) {
    const jobs = await enqueueKeyless(ctx, db, chunk);
    return { jobs, created: jobs.map(() => true) };
  }
  // An inserted row is matched to its input by the random tail its stored uuid keeps (see
  // jobUuid): made unique within the chunk before it is sent (two alike are a 2^-62 chance).
  const position = new Map<string, number>();
  chunk.uuids.forEach((u, i) => {
    while (position.has(uuidTail(u))) u = chunk.uuids[i] = randomUUID();
    position.set(uuidTail(u), i);
  });
  let rows: EnqueueRow[];
  try {
    rows = alone(chunk) ? await enqueueJob(ctx.scope, db, chunk, 0, ctx.channel) : await enqueueJobs(ctx.scope, db, chunk, ctx.channel);
  } catch (err) {
    throw mapWriteError(err);
  }
  /** The jobs this chunk inserted, by the tail of their uuid. */
  const byTail = new Map<string, Job>();
  /** The job holding each scoped key (see scopeOf). */
  const byScope = new Map<string, Job>();
  for (const r of rows) {
    const job = r.inserted ? insertedJob(r, chunk, position.get(uuidTail(r.uuid))) : toJob(r);
    if (r.inserted) byTail.set(uuidTail(job.uuid), job);
    // At most one row per scoped key: an original committed before the statement, or the row
    // this batch inserted first (a later duplicate in the batch resolves to it).
    if (r.idempotency_key !== null) byScope.set(scopeOf(job.queue, job.type, r.idempotency_key), job);
  }
  const missing: ScopedKey[] = [];
  chunk.uuids.forEach((u, i) => {
    const key = chunk.idempotencyKeys[i];
    if (key === null || key === undefined || byTail.has(uuidTail(u))) return;
    const queue = at(chunk.queues, i);
    const type = at(chunk.types, i);
    if (!byScope.has(scopeOf(queue, type, key))) missing.push({ queue, type, key });
  });
  if (missing.length > 0) {
    // A concurrent producer committed the key while this statement ran: read its row now.
    for (const r of await getJobsByIdempotencyKey(ctx.scope, db, missing)) {
      const job = toJob(r);
      if (r.idempotency_key !== null) byScope.set(scopeOf(job.queue, job.type, r.idempotency_key), job);
    }
  }
  const created = new Array<boolean>(chunk.uuids.length);
  const jobs = chunk.uuids.map((u, i) => {
    const inserted = byTail.get(uuidTail(u));
    created[i] = inserted !== undefined;
    const key = chunk.idempotencyKeys[i];
    const job = inserted ?? (key === null || key === undefined ? undefined : byScope.get(scopeOf(at(chunk.queues, i), at(chunk.types, i), key)));
    if (!job) throw new QError(QErrorCode.NOT_FOUND, 'the job holding this idempotency key was deleted meanwhile');
    return job;
  });
  return { jobs, created };
}

/**
 * A key's scope as a map key: queue, type and key joined by NUL, which none of them can hold
 * (checkName refuses it), so two different triples never join alike.
 */
function scopeOf(queue: string, type: string, key: string): string {
  return `${queue}\0${type}\0${key}`;
}

/**
 * Whether `chunk` is a single job with its id left to the table (not part of a split batch): it
 * takes a scalar statement of enqueue-job.ts, with or without a key.
 */
function alone(chunk: EnqueueBatch): boolean {
  return chunk.uuids.length === 1 && chunk.ids[0] === null;
}

/**
 * A chunk without idempotency keys: one statement that reports ids and its clock (see
 * enqueue-jobs.ts), each job then built from its input as the row holds it.
 */
async function enqueueKeyless(ctx: JobStoreContext, db: Queryable, chunk: EnqueueBatch): Promise<Job[]> {
  let r;
  try {
    r = alone(chunk)
      ? await enqueueKeylessJob(ctx.scope, db, chunk, 0, ctx.channel)
      : await enqueueKeylessJobs(ctx.scope, db, chunk, ctx.channel);
  } catch (err) {
    throw mapWriteError(err);
  }
  const n = chunk.uuids.length;
  if (r.inserted !== n || r.ids.length !== n) {
    throw new QError(QErrorCode.INVALID_STATE, `enqueue wrote ${r.inserted} of ${n} jobs without idempotency keys`);
  }
  const now = r.now.getTime();
  const out = new Array<Job>(n);
  for (let i = 0; i < n; i++) {
    // The INSERT's rule: scheduled at runAt when that is later than its now(), else queued at
    // now(). runAt has whole milliseconds and now() is read to the millisecond below it, so the
    // comparison comes out as the statement's did.
    const runAt = chunk.runAts[i]?.getTime();
    const scheduled = runAt !== undefined && runAt > now;
    const id = at(r.ids, i);
    out[i] = newJob(chunk, i, {
      id,
      uuid: jobUuid(id, at(chunk.uuids, i)),
      payload: JSON.parse(at(chunk.payloads, i)) as unknown,
      status: scheduled ? 'scheduled' : 'queued',
      runAt: new Date(scheduled ? runAt : now),
      idempotencyKey: null,
      createdAt: new Date(now),
      updatedAt: new Date(now),
    });
  }
  return out;
}

/** The statement columns of one chunk (see enqueueChunk). */
type EnqueueChunk = Omit<ReturnType<typeof toEnqueueBatch>, 'ids'>;

/** What the database decided for a new job (see INSERTED_COLUMNS); the rest is its input. */
type Decided = Pick<Job, 'id' | 'uuid' | 'payload' | 'status' | 'runAt' | 'idempotencyKey' | 'createdAt' | 'updatedAt'>;

/** A job this chunk inserted (input `i`), from the columns the statement returned (INSERTED_COLUMNS). */
function insertedJob(r: EnqueueRow, chunk: EnqueueChunk, i: number | undefined): Job {
  if (i === undefined) throw new QError(QErrorCode.INVALID_STATE, 'an inserted job is not in its batch');
  return newJob(chunk, i, {
    id: Number(r.id),
    uuid: r.uuid,
    payload: r.payload,
    status: r.status,
    runAt: r.run_at,
    idempotencyKey: r.idempotency_key,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  });
}

/**
 * New job `i` of `chunk` as its row holds it: what the database decided, and for the rest the
 * chunk's input and the table's column defaults. Every field named (no spread): one object of a
 * fixed shape per job, in toJob's order.
 */
function newJob(chunk: EnqueueChunk, i: number, d: Decided): Job {
  // A throttled job stores its window's slot key as its idempotency key: it shows its job key.
  const keys = d.idempotencyKey === null ? NO_KEYS : shownKeys(d.idempotencyKey, null);
  return {
    id: d.id,
    uuid: d.uuid,
    queue: at(chunk.queues, i),
    type: at(chunk.types, i),
    payload: d.payload,
    status: d.status,
    priority: at(chunk.priorities, i),
    runAt: d.runAt,
    attempt: 0,
    maxAttempts: at(chunk.maxAttempts, i),
    idempotencyKey: keys.idempotencyKey,
    lockKey: chunk.lockKeys[i] ?? null,
    leasedBy: null,
    leaseExpiresAt: null,
    cancelRequestedAt: null,
    lastError: null,
    lastErrorStack: null,
    steps: [],
    result: null,
    retryOfId: chunk.retryOfIds[i] ?? null,
    teamId: chunk.teamIds[i] ?? null,
    resourceId: chunk.resourceIds[i] ?? null,
    resumeCount: 0,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    finishedAt: null,
    deadLetteredAt: null,
    snoozes: 0,
    progress: null,
    jobKey: keys.jobKey,
    group: chunk.groups[i] ?? null,
  };
}

/** The keys of a job without any. */
const NO_KEYS = { idempotencyKey: null, jobKey: null } as const;

// Job keys (NewJob.jobKey, migration 0010). Mode throttle becomes an idempotency key, the slot key
// of the key's window (resolveThrottleSlots), and then takes the usual path; modes replace and
// debounce take one statement per keyed job (sql/enqueue-keyed-job.ts), in key order, in one
// transaction with the rest of the batch.

/**
 * Gives each throttled job of `b` its window's slot key as idempotency key: the key, the window
 * and the window's number since the epoch by the database clock, read once for the batch, so all
 * enqueues of a key in one window hold one key and the idempotency fence makes them one job. The
 * job keys left are those of modes replace and debounce (`b.jobKeys` is dropped when none is).
 */
export async function resolveThrottleSlots(ctx: JobStoreContext, db: Queryable, b: EnqueueBatch): Promise<void> {
  const keyed = b.jobKeys;
  if (!keyed?.some((k) => k?.mode === 'throttle')) return;
  // As an operation: a failure (a lost connection, an aborted caller's transaction) is a QError.
  const now = (await ctx.op('enqueue_throttle_clock', () => dbNow(ctx.scope, db))).getTime();
  keyed.forEach((k, i) => {
    if (k?.mode !== 'throttle') return;
    b.idempotencyKeys[i] = `${THROTTLE_SLOT_PREFIX}${k.throttleMs}:${Math.floor(now / k.throttleMs)}:${k.key}`;
    keyed[i] = null;
  });
  if (keyed.every((k) => k === null)) delete b.jobKeys;
}

/**
 * A batch holding jobs with a job key of mode replace or debounce: each such job is its own
 * statement, in key order (byte order of key, queue, type; then input order, so of two jobs of a
 * batch with one key the later one is written last: it wins), so two batches taking the same keys
 * wait for each other in one order and cannot deadlock; the other jobs follow in one chunk. All in
 * one transaction (the caller's, behind a savepoint, when given).
 */
export async function enqueueWithJobKeys(ctx: JobStoreContext, b: EnqueueBatch, client: TransactionClient | undefined): Promise<Enqueued> {
  const keyed = b.jobKeys ?? [];
  const n = b.uuids.length;
  const batch: EnqueueBatch = { ...b, ids: b.uuids.map(() => null) };
  const plain = batch.uuids.map((_, i) => i).filter((i) => keyed[i] === null || keyed[i] === undefined);
  const keys = keyed.map((k) => k?.key ?? null);
  const order = keyOrder(keys, batch.queues, batch.types).filter((i) => keys[i] !== null);
  const run = async (db: Queryable): Promise<Enqueued> => {
    const out: Enqueued = { jobs: new Array<Job>(n), created: new Array<boolean>(n) };
    for (const i of order) {
      const k = at(keyed, i);
      if (k === null) continue;
      let row;
      try {
        row = await enqueueKeyedJob(ctx.scope, db, batch, i, k.key, k.mode === 'debounce', ctx.channel);
      } catch (err) {
        throw mapWriteError(err);
      }
      out.jobs[i] = toJob(row);
      out.created[i] = row.inserted;
    }
    if (plain.length > 0) {
      const got = await enqueueChunk(ctx, db, batch, plain);
      plain.forEach((pos, j) => {
        out.jobs[pos] = at(got.jobs, j);
        out.created[pos] = at(got.created, j);
      });
    }
    return out;
  };
  if (client) {
    return ctx.op(
      'enqueue',
      async () => {
        try {
          return await inCallerTransaction('enqueue', client, () => run(client));
        } catch (err) {
          throw transactionWriteError(err);
        }
      },
      { 'job.count': n, 'job.in_transaction': true },
    );
  }
  return ctx.op('enqueue', () => retryDeadlock(() => (n === 1 ? run(ctx.pool) : withTransaction(ctx.pool, (c) => run(c)))), { 'job.count': n });
}
