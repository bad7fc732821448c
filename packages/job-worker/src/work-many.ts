// Batch handlers: jobs of one type handed to one call. Each job keeps its own lease, heartbeat,
// cancel signal and fenced outcome — the worker runs them as ordinary attempts whose handler
// waits in a collector — so a batch is only a way of calling the user's function: a job whose
// lease is lost mid-batch has its outcome fenced like any other, and each job retries or
// dead-letters on its own.
import { invalidArgument } from '@q/schema';
import type { Job } from '@q/store/jobs';
import { MAX_CONCURRENCY, type HandlerContext, type HandlerFunc } from './options.js';

/**
 * One job of a batch, with its own context: `signal` (aborted when that job's lease is lost or it
 * is cancelled), `steps`, `progress`. To snooze one job of a batch, give it the outcome
 * `{ error: new JobSnoozeError(ms) }` (`ctx.snooze` throws, which would fail the whole batch).
 * A flow node's parents are not read for a batch (`JobStore.flows.parents` reads them by job id).
 */
export interface BatchItem extends Omit<HandlerContext, 'snooze' | 'parents' | 'flow'> {
  job: Job;
}

/**
 * What a batch handler says of one job: `{ result }` (or `{}`) records a success with that
 * result; `{ error }` fails that attempt alone (retried with backoff, or dead-lettered by a
 * `DeadLetterError` or after `maxAttempts`).
 */
export type BatchOutcome = { result?: unknown; error?: undefined } | { error: unknown };

/**
 * Runs one batch: resolve with one outcome per item, in the items' order, or with nothing (every
 * job succeeds, result `null`). A throw fails every job of the batch.
 */
// `void`, not `undefined`: a handler written `async (items) => { await bulkWrite(items); }` must fit.
// eslint-disable-next-line @typescript-eslint/no-invalid-void-type
export type BatchHandlerFunc = (items: readonly BatchItem[]) => Promise<readonly BatchOutcome[] | void>;

/** Options of {@link batchHandler} and `JobQueue.workMany`. */
export interface BatchOptions {
  /** Jobs per call at most: an integer from 1 to 10,000. Default 100. */
  batchSize?: number;
  /** How long the first job of a batch waits for more before the call is made anyway, in ms (0–60,000). Default 50. */
  maxWaitMs?: number;
}

/** Default {@link BatchOptions.batchSize}. */
export const DEFAULT_BATCH_SIZE = 100;
/** Default {@link BatchOptions.maxWaitMs}. */
export const DEFAULT_BATCH_WAIT_MS = 50;
const MAX_BATCH_WAIT_MS = 60_000;

interface Pending {
  item: BatchItem;
  resolve(result: unknown): void;
  reject(err: unknown): void;
}

/** Checks {@link BatchOptions}; returns them with their defaults. */
export function checkBatchOptions(op: string, opts: BatchOptions): Required<BatchOptions> {
  if (typeof opts !== 'object' || opts === null) throw invalidArgument(`${op}: options must be an object`);
  const batchSize = opts.batchSize ?? DEFAULT_BATCH_SIZE;
  const maxWaitMs = opts.maxWaitMs ?? DEFAULT_BATCH_WAIT_MS;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_CONCURRENCY) {
    throw invalidArgument(`${op}: batchSize must be an integer from 1 to ${MAX_CONCURRENCY}`);
  }
  if (!Number.isInteger(maxWaitMs) || maxWaitMs < 0 || maxWaitMs > MAX_BATCH_WAIT_MS) {
    throw invalidArgument(`${op}: maxWaitMs must be an integer from 0 to ${MAX_BATCH_WAIT_MS}`);
  }
  return { batchSize, maxWaitMs };
}

/**
 * Turns a batch handler into a handler for `Worker.register` (what `JobQueue.workMany` does):
 * jobs the worker runs are collected until `batchSize` are waiting or the first has waited
 * `maxWaitMs`, then passed to `fn` in one call. The worker's `concurrency` bounds how many jobs
 * can wait at once, so it should be at least `batchSize` (a multiple lets the next batch gather
 * while one runs).
 */
export function batchHandler(fn: BatchHandlerFunc, opts: BatchOptions = {}): HandlerFunc {
  if (typeof fn !== 'function') throw invalidArgument('batchHandler: fn must be a function');
  const { batchSize, maxWaitMs } = checkBatchOptions('batchHandler', opts);
  let waiting: Pending[] = [];
  let timer: NodeJS.Timeout | undefined;

  const flush = (): void => {
    clearTimeout(timer);
    timer = undefined;
    const batch = waiting;
    waiting = [];
    // A job aborted while it waited (lease lost, cancelled) is not handed over: its attempt ends now.
    const live = batch.filter((p) => {
      if (!p.item.signal.aborted) return true;
      p.reject(p.item.signal.reason);
      return false;
    });
    if (live.length > 0) void runBatch(fn, live);
  };

  return (job, ctx) =>
    new Promise((resolve, reject) => {
      waiting.push({ item: { job, signal: ctx.signal, steps: ctx.steps, progress: ctx.progress }, resolve, reject });
      if (waiting.length >= batchSize) flush();
      else if (waiting.length === 1) timer = setTimeout(flush, maxWaitMs);
    });
}

async function runBatch(fn: BatchHandlerFunc, batch: readonly Pending[]): Promise<void> {
  let outcomes: readonly BatchOutcome[] | undefined;
  try {
    outcomes = (await fn(batch.map((p) => p.item))) ?? undefined;
  } catch (err) {
    for (const p of batch) p.reject(err);
    return;
  }
  if (outcomes === undefined) {
    for (const p of batch) p.resolve(null);
    return;
  }
  if (!Array.isArray(outcomes) || outcomes.length !== batch.length) {
    const got = Array.isArray(outcomes) ? `${outcomes.length} outcomes` : typeof outcomes;
    const err = new Error(`workMany: the batch handler must return one outcome per job (${batch.length}), or nothing; it returned ${got}`);
    for (const p of batch) p.reject(err);
    return;
  }
  batch.forEach((p, i) => {
    const o: unknown = outcomes[i];
    if (typeof o !== 'object' || o === null) {
      p.reject(new Error(`workMany: outcome ${i} must be { result } or { error }`));
    } else if ('error' in o && o.error !== undefined) {
      p.reject(o.error);
    } else {
      p.resolve('result' in o ? o.result : null);
    }
  });
}
