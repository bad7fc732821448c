// `@q/job-worker/testing`: what a user's tests need to run their handlers on a real database
// without timing games: drain a queue in-process, assert what was enqueued, run one handler alone.
import { AssertionError } from 'node:assert';
import { isDeepStrictEqual } from 'node:util';
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import { checkOptionsObject } from '@q/schema/internal';
import { progressJson, type Job, type JobStatus, type Step } from '@q/store/jobs';
import type { JobDefinition, TypedJob } from './define-job.js';
import { DeadLetterError, JobSnoozeError, checkSnoozeMs } from './errors.js';
import { queueInternals, type JobQueue } from './job-queue.js';
import type { HandlerContext } from './options.js';
import { StepRecorder } from './step-recorder.js';
import { sleep } from './timers.js';
import { Worker } from './worker.js';

/** What became of one job during a {@link drain}. */
export interface DrainOutcome {
  uuid: string;
  id: number;
  type: string;
  queue: string;
  /** The payload as the worker read it. */
  payload: unknown;
  /**
   * Where the job ended: `succeeded`, `dead_letter`, `retry_wait` (failed, retries not run: see
   * {@link DrainOptions.runRetries}), `lease_lost`, `scheduled` or `queued` (snoozed, and not run
   * again by this drain), or what the table says otherwise (`cancelled`).
   */
  status: JobStatus | 'lease_lost';
  /** Attempts this drain ran. */
  attempts: number;
  /** The handler's result, once it succeeded. */
  result?: unknown;
  /** The message of each failed attempt, in order. */
  errors: string[];
}

/** Options of {@link drain}. */
export interface DrainOptions {
  /**
   * Run the retries of attempts that fail during the drain at once (`true`, the default: the
   * drain's workers use a 1 ms retry base, so a job goes through all its attempts), or leave them
   * in `retry_wait` with their usual backoff (`false`).
   */
  runRetries?: boolean;
  /** Stop once this returns true for an outcome (checked after each recorded attempt). */
  until?: (outcome: DrainOutcome) => boolean;
  /** Jobs run at once per queue. Default 1, so jobs run one by one in claim order. */
  concurrency?: number;
  /** Longest drain (ms); past it the drain stops and rejects with `INVALID_STATE`. Default 30 000. */
  timeoutMs?: number;
}

/** How often the drain looks for due jobs and promotes retries (ms). */
const DRAIN_TICK_MS = 20;
/** Retry base of a drain's workers with `runRetries`: failed attempts are due again at once. */
const IMMEDIATE_RETRY_MS = 1;

/**
 * Runs every due job of `queue` in-process, with the handlers its `work` registered, until none is
 * due and nothing runs, and returns what became of each job it ran, in the order they started.
 * `queue` must come from `JobQueue.open(dsn, { startWorkers: false })`: then `work` only registers
 * handlers, and jobs run when a drain runs them. Each drain runs fresh workers (one per queue
 * `work` registered, with the open's `worker` options and the listeners given to what `work`
 * returned) and stops them before it returns. Due means `queued`, or `scheduled`/`retry_wait` whose
 * time has come; a job scheduled later is left alone.
 *
 * ```ts
 * const queue = await JobQueue.open(dsn, { startWorkers: false });
 * queue.work('email.send', handler);
 * await queue.enqueue({ type: 'email.send', payload });
 * const [outcome] = await drain(queue); // { status: 'succeeded', result, attempts: 1, … }
 * ```
 */
export async function drain(queue: JobQueue, opts: DrainOptions = {}): Promise<DrainOutcome[]> {
  checkOptionsObject('drain', opts);
  const { store, managed } = queueInternals(queue);
  const manual = managed?.manual();
  if (!managed || !manual) {
    throw new QError(
      QErrorCode.INVALID_STATE,
      'drain: the queue must come from JobQueue.open(dsn, { startWorkers: false }) (its workers would race the drain otherwise)',
    );
  }
  const runRetries = opts.runRetries ?? true;
  if (typeof runRetries !== 'boolean') throw invalidArgument('drain: runRetries must be a boolean');
  if (opts.until !== undefined && typeof opts.until !== 'function') throw invalidArgument('drain: until must be a function');
  const concurrency = opts.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1) throw invalidArgument('drain: concurrency must be a positive integer');
  const timeoutMs = opts.timeoutMs ?? 30_000;
  if (typeof timeoutMs !== 'number' || !(timeoutMs > 0)) throw invalidArgument('drain: timeoutMs must be a positive number');

  const outcomes = new Map<string, DrainOutcome>();
  let stop = false;
  const running: Array<{ worker: Worker; idle: boolean; ac: AbortController; run: Promise<void> }> = [];
  const recorded = (o: DrainOutcome): void => {
    if (stop || !opts.until?.(o)) return;
    stop = true;
    // At once, from the listener: a job claimed with this outcome's write goes back unstarted.
    for (const r of running) r.ac.abort();
  };
  const queues = [...manual.keys()];
  const outcomeOf = (job: Job): DrainOutcome => {
    let o = outcomes.get(job.uuid);
    if (!o) {
      o = { uuid: job.uuid, id: job.id, type: job.type, queue: job.queue, payload: job.payload, status: 'queued', attempts: 0, errors: [] };
      outcomes.set(job.uuid, o);
    }
    return o;
  };
  /** An attempt's outcome: one without a start (no handler for its type) still counts as run. */
  const ended = (job: Job): DrainOutcome => {
    const o = outcomeOf(job);
    if (o.status !== 'running') o.attempts++;
    return o;
  };
  for (const [name, entry] of manual) {
    const worker = new Worker(store, {
      ...managed.workerOptions(),
      queues: [name],
      concurrency,
      prefetch: 0,
      schedules: false,
      pollIntervalMs: 50,
      ...(runRetries ? { retryBaseMs: IMMEDIATE_RETRY_MS } : {}),
    });
    for (const [type, handler] of entry.handlers) worker.register(type, handler);
    for (const { event, listener } of entry.listeners) worker.on(event, listener);
    const state = { worker, idle: true, ac: new AbortController(), run: Promise.resolve() };
    worker.on('job:start', ({ job }) => {
      state.idle = false;
      const o = outcomeOf(job);
      o.status = 'running';
      o.attempts++;
    });
    worker.on('job:success', ({ job, result }) => {
      const o = ended(job);
      o.status = 'succeeded';
      o.result = result;
      recorded(o);
    });
    worker.on('job:retry', ({ job, error }) => {
      const o = ended(job);
      o.status = 'retry_wait';
      o.errors.push(error);
      recorded(o);
    });
    worker.on('job:snoozed', ({ job, delayMs }) => {
      const o = ended(job);
      o.status = delayMs > 0 ? 'scheduled' : 'queued';
      recorded(o);
    });
    worker.on('job:dead-letter', ({ job, error }) => {
      const o = ended(job);
      o.status = 'dead_letter';
      o.errors.push(error);
      recorded(o);
    });
    worker.on('job:lease-lost', ({ job }) => void (outcomeOf(job).status = 'lease_lost'));
    worker.on('drained', () => void (state.idle = true));
    state.run = worker.run(state.ac.signal);
    running.push(state);
  }

  const deadline = performance.now() + timeoutMs;
  let quiet = 0;
  let failure: unknown;
  try {
    while (!stop) {
      await store.promoteDue();
      const backlog = await store.backlog();
      const due = backlog.some(
        (b) => queues.includes(b.queue) && b.count > 0 && (b.status === 'queued' || b.status === 'leased' || b.status === 'running'),
      );
      const retrying = runRetries && [...outcomes.values()].some((o) => o.status === 'retry_wait');
      // Twice in a row: an outcome written a moment ago may not have reached its listener yet.
      if (due || retrying || running.some((r) => !r.idle)) quiet = 0;
      else if (++quiet >= 2) break;
      if (performance.now() > deadline) {
        throw new QError(QErrorCode.INVALID_STATE, `drain: jobs were still due or running after ${timeoutMs} ms (timeoutMs)`);
      }
      await sleep(DRAIN_TICK_MS);
    }
  } catch (err) {
    failure = err;
  } finally {
    for (const r of running) r.ac.abort();
    for (const r of running) {
      await r.run.catch((err: unknown) => (failure ??= err));
      await r.worker.wait(5_000);
    }
  }
  if (failure !== undefined) throw failure;
  // Ended without an outcome event (cancelled): the table says how.
  for (const o of outcomes.values()) {
    if (o.status === 'running') o.status = (await store.get(o.uuid))?.status ?? 'running';
  }
  return [...outcomes.values()];
}

/** What {@link assertEnqueued} looks for. */
export interface EnqueuedMatch {
  /** The job type, or the definition that names it. */
  type: string | Pick<JobDefinition<unknown>, 'type'>;
  /**
   * The payload, matched as a subset: every key given must be there with an equal value (deep,
   * strict; arrays element by element, same length); keys not given are ignored.
   */
  payload?: unknown;
  /** Only in this queue. */
  queue?: string;
  /** Only in this status (any by default). */
  status?: JobStatus;
}

/** Most jobs of the type {@link assertEnqueued} reads. */
const ASSERT_SCAN_LIMIT = 1_000;

/**
 * Resolves with the newest job of `match.type` whose payload matches `match.payload` (and queue
 * and status, if given); rejects with an `AssertionError` listing the jobs of that type it found
 * otherwise. Reads the table, so it sees what any producer enqueued, in any process.
 */
export async function assertEnqueued(queue: JobQueue, match: EnqueuedMatch): Promise<Job> {
  checkOptionsObject('assertEnqueued', match);
  const type = typeof match.type === 'string' ? match.type : match.type?.type;
  if (typeof type !== 'string') throw invalidArgument('assertEnqueued: type must be a job type or a job definition');
  const seen: Job[] = [];
  let cursor: string | undefined;
  do {
    const page = await queue.list({ type, limit: 100, ...(match.status ? { status: match.status } : {}), ...(cursor ? { cursor } : {}) });
    for (const job of page.jobs) {
      if (match.queue !== undefined && job.queue !== match.queue) continue;
      if (!('payload' in match) || matches(match.payload, job.payload)) return job;
      seen.push(job);
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor && seen.length < ASSERT_SCAN_LIMIT);
  const what = `a job of type "${type}"${match.queue ? ` in queue "${match.queue}"` : ''}${match.status ? ` in status ${match.status}` : ''}`;
  const found =
    seen.length === 0 ? 'none was found' : `found ${seen.length}: ${seen.map((j) => `${j.status} ${JSON.stringify(j.payload)}`).join(', ')}`;
  throw new AssertionError({
    message: `expected ${what}${'payload' in match ? ` with payload matching ${JSON.stringify(match.payload)}` : ''}, ${found}`,
    expected: match.payload,
    actual: seen.map((j) => j.payload),
  });
}

/** Whether `actual` has everything `expected` has (objects as subsets, the rest deep-equal). */
function matches(expected: unknown, actual: unknown): boolean {
  if (Array.isArray(expected))
    return Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => matches(e, actual[i]));
  if (expected !== null && typeof expected === 'object' && !(expected instanceof Date)) {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
    return Object.entries(expected).every(([k, v]) => Object.hasOwn(actual, k) && matches(v, (actual as Record<string, unknown>)[k]));
  }
  return isDeepStrictEqual(expected, actual);
}

/**
 * What a handler run by {@link runHandler} came to, with the steps it recorded and, when it
 * reported any, the progress values (`ctx.progress`, each as stored, in order; absent otherwise).
 */
export type HandlerRun<Result> =
  | { status: 'succeeded'; result: Result; steps: Step[]; progress?: unknown[] }
  | {
      status: 'failed';
      error: unknown;
      /** The handler asked for the dead letter ({@link DeadLetterError}): no retry would follow. */
      deadLetter: boolean;
      steps: Step[];
      progress?: unknown[];
    }
  | {
      /** The handler snoozed its job (`ctx.snooze` or a {@link JobSnoozeError}) for `delayMs`. */
      status: 'snoozed';
      delayMs: number;
      steps: Step[];
      progress?: unknown[];
    };

/** Options of {@link runHandler}. */
export interface RunHandlerOptions {
  /** Fields of the job the handler is given (default: a first attempt of type `test`, queue `default`). */
  job?: Partial<Omit<Job, 'payload'>>;
  /** The handler's `signal` (default: one never aborted). */
  signal?: AbortSignal;
}

/**
 * Runs one handler on `payload` with a fake context — no database: its `signal` (never aborted
 * unless you pass one), a step recorder kept in memory, `progress` that keeps each value and
 * `snooze` that ends the run `snoozed` — and returns what it came to and the steps (and progress)
 * it recorded. A handler that throws is reported, not rethrown. Pass a definition's
 * `handler(fn)` to include its schema check (a payload it refuses fails as dead letter).
 */
export async function runHandler<Payload, Result>(
  handler: (job: TypedJob<Payload, Result>, ctx: HandlerContext) => Promise<Result>,
  payload: Payload,
  opts: RunHandlerOptions = {},
): Promise<HandlerRun<Result>> {
  if (typeof handler !== 'function') throw invalidArgument('runHandler: handler must be a function');
  checkOptionsObject('runHandler', opts);
  const now = new Date();
  const job: TypedJob<Payload, Result> = {
    id: 1,
    uuid: '00000000-0000-4000-8000-000000000001',
    queue: 'default',
    type: 'test',
    status: 'running',
    priority: 0,
    runAt: now,
    attempt: 1,
    maxAttempts: 5,
    idempotencyKey: null,
    lockKey: null,
    leasedBy: 'test',
    leaseExpiresAt: null,
    cancelRequestedAt: null,
    lastError: null,
    lastErrorStack: null,
    steps: [],
    retryOfId: null,
    teamId: null,
    resourceId: null,
    resumeCount: 0,
    snoozes: 0,
    progress: null,
    jobKey: null,
    group: null,
    createdAt: now,
    updatedAt: now,
    finishedAt: null,
    deadLetteredAt: null,
    ...opts.job,
    payload,
    result: null,
  };
  const steps = new StepRecorder(async () => true);
  const progress: unknown[] = [];
  let snoozeMs: number | undefined;
  const ctx: HandlerContext = {
    signal: opts.signal ?? new AbortController().signal,
    steps,
    snooze(delayMs: number): never {
      snoozeMs ??= checkSnoozeMs('snooze', delayMs);
      throw new JobSnoozeError(snoozeMs);
    },
    progress(value: unknown): Promise<void> {
      const json = progressJson('progress', value);
      progress.push(json === null ? null : JSON.parse(json));
      return Promise.resolve();
    },
    parents: Promise.resolve({}),
    flow: {
      add(): Promise<never> {
        return Promise.reject(new QError(QErrorCode.INVALID_STATE, 'runHandler: flow.add needs a job of a flow on a queue (use drain)'));
      },
    },
  };
  // Only a handler that reported progress has the key: a run's shape is otherwise as it was.
  const reported = (): { progress?: unknown[] } => (progress.length > 0 ? { progress } : {});
  try {
    const result = await handler(job, ctx);
    if (snoozeMs !== undefined) return { status: 'snoozed', delayMs: snoozeMs, steps: steps.steps, ...reported() };
    return { status: 'succeeded', result, steps: steps.steps, ...reported() };
  } catch (error) {
    const delayMs = snoozeMs ?? (error instanceof JobSnoozeError ? error.delayMs : undefined);
    if (delayMs !== undefined) return { status: 'snoozed', delayMs, steps: steps.steps, ...reported() };
    return { status: 'failed', error, deadLetter: error instanceof DeadLetterError, steps: steps.steps, ...reported() };
  }
}
