// Enqueues with a job key (NewJob.jobKey, migration 0010). Mode throttle becomes an idempotency
// key, the slot key of the key's window (see resolveThrottleSlots), and then takes the usual
// path; modes replace and debounce take one statement per keyed job (sql/enqueue-keyed-job.ts),
// in key order, in one transaction with the rest of the batch.
import { at, withTransaction } from '@q/schema/internal';
import { inCallerTransaction, type TransactionClient } from '../../transaction.js';
import { keyOrder, retryDeadlock } from '../batches.js';
import { transactionWriteError } from '../from-pool.js';
import { THROTTLE_SLOT_PREFIX, toJob } from '../row.js';
import type { Queryable } from '../sql/db.js';
import { dbNow } from '../sql/db-now.js';
import { enqueueKeyedJob } from '../sql/enqueue-keyed-job.js';
import type { EnqueueBatch } from '../sql/enqueue-jobs.js';
import type { Job } from '../types.js';
import { mapWriteError, type JobStoreContext } from './context.js';

/** The jobs of an enqueue in input order, and for each whether this call inserted it. */
export interface Enqueued {
  jobs: Job[];
  created: boolean[];
}

/** Writes the jobs at `indices` of a batch without job keys (ops/enqueue.ts: enqueueChunk). */
export type ChunkWriter = (db: Queryable, b: EnqueueBatch, indices: number[]) => Promise<Enqueued>;

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
export async function enqueueWithJobKeys(
  ctx: JobStoreContext,
  b: EnqueueBatch,
  client: TransactionClient | undefined,
  writeChunk: ChunkWriter,
): Promise<Enqueued> {
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
      const got = await writeChunk(db, batch, plain);
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
