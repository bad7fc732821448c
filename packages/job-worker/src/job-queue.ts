import { SpanKind, type Tracer, type TracerProvider } from '@opentelemetry/api';
import {
  currentTraceparent,
  flowMetrics,
  formatTraceparent,
  jobMetrics,
  qMeter,
  qTracer,
  recordError,
  type FlowMetrics,
  type MeterProvider,
} from '@q/otel';
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import {
  JobStore,
  FLOW_REQUEST_TYPE,
  deadLetterRetry,
  type EnqueueResult,
  type FlowCancelled,
  type FlowInfo,
  type FlowResult,
  type InTransaction,
  type NewFlow,
  type Job,
  type GroupRunning,
  type JobListFilter,
  type JobPage,
  type NewJob,
  type WaitForOptions,
} from '@q/store/jobs';
import type { WorkerEventSource } from './events.js';
import { defaultLogger } from './logger.js';
import { ManagedWorkers, type WorkOptions, type WorkerHealth } from './managed-workers.js';
import { DEFAULT_CLOSE_TIMEOUT_MS, METRIC_UNSERVED_ENQUEUES, checkOpenOptions, type JobQueueOpenOptions } from './open-options.js';
import { withTraceparent } from './payload-traceparent.js';
import type { HandlerFunc } from './worker.js';
import { batchHandler, checkBatchOptions, type BatchHandlerFunc, type BatchOptions } from './work-many.js';
import { resumeStoredSchedule, upsertSchedule, type ScheduleInfo, type ScheduleOptions } from './schedules.js';

/** What `@q/job-worker/testing` reaches inside a queue (not exported from the package root). */
export interface QueueInternals {
  store: JobStore;
  managed: ManagedWorkers | undefined;
}

let internals: (queue: JobQueue) => QueueInternals;

/** The store and workers of `queue`, for the test kit (`drain` runs jobs on them). */
export function queueInternals(queue: JobQueue): QueueInternals {
  return internals(queue);
}

/**
 * A job to enqueue: the store's {@link NewJob}, with `queue` optional (default `default`; it must
 * be one of the queue's `knownQueues`).
 */
export type EnqueueOptions = Omit<NewJob, 'queue'> & { queue?: string };

/** Options of {@link JobQueue}. */
export interface JobQueueOptions {
  /** The queues some worker consumes: enqueueing anywhere else is refused with `UNKNOWN_QUEUE`. */
  knownQueues: string[];
  /** Where `q.flows.started` is recorded. Default: the global meter provider (a no-op until an app registers an SDK). */
  meterProvider?: MeterProvider;
  /**
   * Where `flow` records its `q.flows.create` span, the root of the flow's trace (every node's
   * `q.jobs.process` span is its child). Default: none; a flow inserted under an active span is
   * then part of that span's trace.
   */
  tracerProvider?: TracerProvider;
}

/**
 * The job queue: enqueue, inspect, cancel, and manage the dead letter. Opened with
 * {@link JobQueue.open} it also owns its store and runs workers ({@link JobQueue.work}) until
 * {@link JobQueue.close}; constructed on a store, it is the producer side only.
 */
export class JobQueue {
  static {
    internals = (q) => ({ store: q.#store, managed: q.#managed });
  }

  readonly #store: JobStore;
  readonly #known: readonly string[];
  readonly #flowMetrics: FlowMetrics;
  readonly #tracer: Tracer | undefined;
  /** Set by {@link JobQueue.open}: the queue owns its store and workers. */
  #managed: ManagedWorkers | undefined;

  constructor(store: JobStore, opts: JobQueueOptions) {
    if (!store || typeof store.enqueue !== 'function') throw invalidArgument('new JobQueue: store must be a JobStore');
    const known = opts?.knownQueues;
    if (!Array.isArray(known) || known.length === 0 || known.some((q) => typeof q !== 'string' || q === '')) {
      throw invalidArgument('new JobQueue: knownQueues must be a non-empty array of queue names');
    }
    this.#store = store;
    this.#known = Object.freeze([...known]);
    this.#flowMetrics = flowMetrics(opts.meterProvider);
    this.#tracer = qTracer(opts.tracerProvider);
  }

  /**
   * Opens a job queue on `dsn` that owns its {@link JobStore} (the `jobs` tables are migrated
   * unless `migrate: false`). Any queue name may be enqueued to; a job sent to a queue that no
   * worker of this process serves and that is not listed in `queues` is counted
   * (`q.jobs.unserved_enqueues`) and warned about once per queue, never dropped silently.
   *
   * ```ts
   * const queue = await JobQueue.open(process.env.DATABASE_URL!);
   * queue.work('email', async (job) => send(job.payload));
   * await queue.enqueue({ type: 'email', payload: { to: 'a@example.com' } });
   * await queue.close();
   * ```
   */
  static async open(dsn: string, opts: JobQueueOpenOptions = {}): Promise<JobQueue> {
    checkOpenOptions(opts);
    const { queues, logger, worker, onWorkerStopped, closeTimeoutMs: _closeTimeoutMs, startWorkers, ...storeOptions } = opts;
    const store = await JobStore.open(dsn, storeOptions);
    const queue = new JobQueue(store, {
      knownQueues: ['default'],
      ...(opts.meterProvider ? { meterProvider: opts.meterProvider } : {}),
      ...(opts.tracerProvider ? { tracerProvider: opts.tracerProvider } : {}),
    });
    queue.#managed = new ManagedWorkers(store, {
      logger: logger ?? defaultLogger(),
      onWorkerStopped,
      metrics: jobMetrics(opts.meterProvider),
      ...(opts.tracerProvider ? { tracer: qTracer(opts.tracerProvider) } : {}),
      defaults: worker ?? {},
      declared: queues ?? [],
      startWorkers: startWorkers !== false,
      unserved: qMeter(opts.meterProvider).createCounter(METRIC_UNSERVED_ENQUEUES, {
        unit: '{job}',
        description: 'Jobs enqueued to a queue no worker of the enqueuing process serves (and not declared served elsewhere)',
      }),
    });
    queue.#closeTimeoutMs = opts.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS;
    return queue;
  }

  #closeTimeoutMs = DEFAULT_CLOSE_TIMEOUT_MS;
  #closed: Promise<void> | undefined;

  /**
   * Runs `handler` for every job of `type` on `opts.queue` (default `default`), `concurrency`
   * (default 10) at a time, with retries, leases and dead-lettering as {@link Worker} does. One
   * worker serves each queue; it starts on the next turn of the event loop, so handlers
   * registered together are known before its first claim. Only on a queue from {@link JobQueue.open}
   * (`INVALID_STATE` otherwise: use a {@link Worker} on your store). A worker stopped by
   * persistent failures is not restarted: `work` for its queue is then `INVALID_STATE` (see
   * {@link JobQueue.health}).
   *
   * Returns the events of the queue's worker (`on(event, listener)`, see `WorkerEventMap`):
   * the worker serves every type registered on that queue, so its `job:*` events carry jobs of
   * all of them.
   */
  work(type: string, handler: HandlerFunc, opts: WorkOptions = {}): WorkerEventSource {
    if (!this.#managed) {
      throw new QError(QErrorCode.INVALID_STATE, 'work: only a queue from JobQueue.open runs workers (use new Worker(store, …) otherwise)');
    }
    return this.#managed.work(type, handler, opts);
  }

  /**
   * Like {@link JobQueue.work}, but `handler` gets up to `batchSize` jobs of `type` in one call
   * (after at most `maxWaitMs` of gathering) and returns one outcome per job: `{ result }` or
   * `{ error }` (see {@link batchHandler}). Each job keeps its own lease, cancel signal, retries
   * and fenced outcome; a throw fails every job of the batch. `concurrency` defaults to
   * `batchSize` and may not be smaller (it bounds how many jobs can gather): give batch types a
   * queue of their own.
   */
  workMany(type: string, handler: BatchHandlerFunc, opts: WorkOptions & BatchOptions = {}): WorkerEventSource {
    const batch = checkBatchOptions('workMany', opts);
    const concurrency = opts.concurrency ?? batch.batchSize;
    if (concurrency < batch.batchSize) throw invalidArgument('workMany: concurrency must be at least batchSize');
    const work: WorkOptions = { concurrency };
    if (opts.queue !== undefined) work.queue = opts.queue;
    return this.work(type, batchHandler(handler, batch), work);
  }

  /**
   * The worker of each queue `work` serves: `running`, `stopped` (with the error: it met
   * `worker.maxPersistentFailures` identical persistent database failures in a row and is not
   * restarted; `work` for that queue is refused) or `closed`. Empty on a queue built on your own
   * store, which runs no workers.
   */
  health(): WorkerHealth[] {
    return this.#managed?.health() ?? [];
  }

  /**
   * Stops the workers claiming, waits for the jobs in flight to finish with their outcomes
   * recorded (up to `closeTimeoutMs`, default 30 s; later ones go back to the queue), then
   * closes the store. Idempotent. On a queue built on your own store it does nothing: the store
   * is yours to close.
   */
  close(): Promise<void> {
    const managed = this.#managed;
    if (!managed) return Promise.resolve();
    this.#closed ??= managed.close(this.#closeTimeoutMs).finally(() => this.#store.close());
    return this.#closed;
  }

  /**
   * Enqueues one job and returns it. An idempotency key is held per queue and type: while a job
   * with the same key, queue and type is kept (live or finished), that job is returned, unchanged
   * ({@link JobQueue.enqueueResult} tells which happened); the same key in another queue or of
   * another type makes a new job. A `jobKey` dedupes pending work instead, per queue and type:
   * `jobKeyMode` `replace` (default) or `debounce` updates the pending job holding it, `throttle`
   * (with `throttleMs`) returns the one job of the key's window; see the README's table. Unknown
   * queue → `UNKNOWN_QUEUE`; bad field (an empty `type` among them) → `INVALID_ARGUMENT`; nothing
   * is written then.
   *
   * With `{ client }` (a pg client in the caller's transaction, or `drizzleClient(tx)`), the job is
   * written in that transaction: it exists iff the transaction commits, and workers are woken at
   * the commit. A failure leaves the caller's transaction usable; q never commits or rolls it back.
   */
  async enqueue(opts: EnqueueOptions, tx?: InTransaction): Promise<Job> {
    const job = this.#toNewJob(opts, currentTraceparent());
    const [out] = await (tx === undefined ? this.#store.enqueue([job]) : this.#store.enqueue([job], tx));
    this.#managed?.enqueued(job.queue, 1);
    if (!out) throw new Error('enqueue: the store must return one job per job written'); // unreachable: enqueue returns one row per input
    return out;
  }

  /**
   * {@link JobQueue.enqueue}, returning `{ job, created }`: `created` is `true` when this call
   * inserted the job, `false` when its idempotency key was already held in its queue and type and
   * `job` is the job holding it. Of concurrent calls with one key, queue and type, exactly one
   * gets `created: true`.
   */
  async enqueueResult(opts: EnqueueOptions, tx?: InTransaction): Promise<EnqueueResult> {
    const job = this.#toNewJob(opts, currentTraceparent());
    const [out] = await (tx === undefined ? this.#store.enqueueResults([job]) : this.#store.enqueueResults([job], tx));
    this.#managed?.enqueued(job.queue, 1);
    if (!out) throw new Error('enqueueResult: the store must return one result per job written'); // unreachable: one row per input
    return out;
  }

  /**
   * Enqueues many jobs with the same rules, all or none: every job is checked before anything is
   * sent, and each chunk of up to 2,000 jobs is one statement. Returns the jobs in input order.
   * `{ client }` as for {@link JobQueue.enqueue}: all of them exist iff the caller's transaction commits.
   */
  async enqueueMany(opts: EnqueueOptions[], tx?: InTransaction): Promise<Job[]> {
    const jobs = this.#toNewJobs('enqueueMany', opts);
    const out = await (tx === undefined ? this.#store.enqueue(jobs) : this.#store.enqueue(jobs, tx));
    this.#countEnqueued(jobs);
    return out;
  }

  /**
   * {@link JobQueue.enqueueMany}, returning `{ job, created }` per job in input order, as
   * {@link JobQueue.enqueueResult} does. A job whose key, queue and type repeat an earlier job of
   * the same call gets that job back with `created: false`.
   */
  async enqueueManyResults(opts: EnqueueOptions[], tx?: InTransaction): Promise<EnqueueResult[]> {
    const jobs = this.#toNewJobs('enqueueManyResults', opts);
    const out = await (tx === undefined ? this.#store.enqueueResults(jobs) : this.#store.enqueueResults(jobs, tx));
    this.#countEnqueued(jobs);
    return out;
  }

  /**
   * Inserts a job graph atomically (see `JobStore.flows.insert`): one job per node, queued once every
   * node it `dependsOn` has succeeded, released in the transaction that records the last
   * parent's success; a parent's dead letter or cancel applies each edge's `onFailure` policy
   * (`fail`, `continue`, `ignore`, `cancel`). Returns `{ flowId, created, jobs }`, the jobs by
   * node ref. A node's queue must be known, as for {@link JobQueue.enqueue} (`UNKNOWN_QUEUE`);
   * a bad graph is `INVALID_ARGUMENT` naming the node; nothing is written then. An
   * `idempotencyKey` held by a flow returns that flow. `{ client }` as for {@link JobQueue.enqueue}.
   * A node `{ ref, request: { queue, payload, deadline | deadlineSeconds, tenant? }, dependsOn? }`
   * is an inference step: a request on the request queue (`RequestStore` of `@q/store`, in the
   * same schema), sent when the node becomes runnable (with the flow, or at its release), whose
   * result finishes the node (its children read the model's response as `ctx.parents[ref].result`).
   */
  async flow(input: NewFlow, tx?: InTransaction): Promise<FlowResult> {
    if (!input || typeof input !== 'object' || !Array.isArray(input.nodes)) throw invalidArgument('flow: the flow must be an object with nodes');
    for (const node of input.nodes) {
      // An inference step's queue is a request queue, served outside this job queue.
      if (node && typeof node === 'object' && node.request !== undefined) continue;
      const queue = node && typeof node === 'object' && typeof node.queue === 'string' && node.queue !== '' ? node.queue : 'default';
      if (!this.#managed && !this.#known.includes(queue)) {
        throw new QError(QErrorCode.UNKNOWN_QUEUE, `queue: "${queue}" is not consumed by any worker (known: [${this.#known.join(' ')}])`);
      }
    }
    // The flow's trace: under a q.flows.create span when this queue has a tracer, else under the
    // caller's active span. Its traceparent goes into each job node's payload, and each node's
    // span is its child, so the flow is one trace sampled once, by the sampler of its root.
    const span = this.#tracer?.startSpan('q.flows.create', {
      kind: SpanKind.PRODUCER,
      attributes: { 'q.flow.nodes': input.nodes.length, ...(typeof input.name === 'string' ? { 'q.flow.name': input.name } : {}) },
    });
    const traceparent = (span && formatTraceparent(span.spanContext())) ?? currentTraceparent();
    const flow: NewFlow =
      traceparent === undefined
        ? input
        : {
            ...input,
            nodes: input.nodes.map((n) =>
              n && typeof n === 'object' && n.request === undefined ? { ...n, payload: withTraceparent(n.payload, traceparent) } : n,
            ),
          };
    let out: FlowResult;
    try {
      out = await (tx === undefined ? this.#store.flows.insert(flow) : this.#store.flows.insert(flow, tx));
    } catch (err) {
      if (span) {
        recordError(span, err);
        span.end();
      }
      throw err;
    }
    if (span) {
      span.setAttributes({ 'q.flow.id': out.flowId, 'q.flow.created': out.created });
      span.end();
    }
    if (out.created) {
      this.#flowMetrics.started.add(1);
      for (const j of Object.values(out.jobs)) if (j.type !== FLOW_REQUEST_TYPE) this.#managed?.enqueued(j.queue, 1);
    }
    return out;
  }

  /** Each of `opts` checked and made a store job (one traceparent for all), or the first bad one's error naming its index. */
  #toNewJobs(op: string, opts: EnqueueOptions[]): NewJob[] {
    if (!Array.isArray(opts)) throw invalidArgument(`${op}: jobs must be an array of EnqueueOptions`);
    const traceparent = currentTraceparent();
    return opts.map((o, i) => {
      try {
        return this.#toNewJob(o, traceparent);
      } catch (err) {
        if (err instanceof Error && opts.length > 1) err.message += ` (job ${i})`;
        throw err;
      }
    });
  }

  /** Counts a batch's jobs per queue for the unserved-enqueue metric of an opened queue. */
  #countEnqueued(jobs: readonly NewJob[]): void {
    if (!this.#managed) return;
    const perQueue = new Map<string, number>();
    for (const j of jobs) perQueue.set(j.queue, (perQueue.get(j.queue) ?? 0) + 1);
    for (const [queue, n] of perQueue) this.#managed.enqueued(queue, n);
  }

  /** The job with this uuid, or `null`. */
  get(uuid: string): Promise<Job | null> {
    return this.#store.get(uuid);
  }

  /**
   * Resolves with the job once it has finished — `succeeded` (its `result`), `dead_letter` or
   * `cancelled` — woken by a notification when the job is archived, polling where the queue
   * cannot listen (see `JobStore.waitFor`, which also lists its errors: `TIMEOUT` after
   * `timeoutMs`, `NOT_FOUND`, `CLOSED`, the signal's reason on abort).
   *
   * @example
   * const job = await queue.enqueue({ type: 'resize', payload: { id: 7 } });
   * const done = await queue.waitFor(job.uuid, { timeoutMs: 30_000 });
   * if (done.status === 'succeeded') console.log(done.result);
   */
  waitFor(uuid: string, opts?: WaitForOptions): Promise<Job> {
    return this.#store.waitFor(uuid, opts);
  }

  /** A page of jobs, `id DESC`; pass `nextCursor` as `cursor` for the next one. `limit` 1–100, default 25. */
  list(filter: JobListFilter = {}): Promise<JobPage> {
    return this.#store.list(filter);
  }

  /**
   * The flow `flowId` (from {@link JobQueue.flow}): each node's job by ref (status, result, error,
   * timestamps), its edges with their failure policies, and when it finished; `null` for an
   * unknown id. `list({ flowId })` pages through its nodes like any jobs.
   */
  getFlow(flowId: string): Promise<FlowInfo | null> {
    return this.#store.flows.get(flowId);
  }

  /**
   * Resolves with the flow once every node of it has finished (see `JobStore.flows.waitFor`):
   * `NOT_FOUND` for an unknown flow, `TIMEOUT` after `timeoutMs`, the signal's reason on abort.
   */
  waitForFlow(flowId: string, opts?: WaitForOptions): Promise<FlowInfo> {
    return this.#store.flows.waitFor(flowId, opts);
  }

  /**
   * Cancels every live node of the flow: waiting and queued ones at once (they never start),
   * running ones through their `signal` (they end `cancelled`). Returns how many of each.
   */
  cancelFlow(flowId: string): Promise<FlowCancelled> {
    return this.#store.flows.cancel(flowId);
  }

  /**
   * Runs the flow's failed nodes again in place (see `JobStore.flows.retry`): `mode: 'failed'` the
   * nodes in the dead letter or cancelled, `'failed-and-downstream'` also the finished nodes
   * below them. Each waits again for its parents that are not succeeded. Returns how many.
   */
  retryFlow(flowId: string, opts: { mode: 'failed' | 'failed-and-downstream' } = { mode: 'failed' }): Promise<{ retried: number }> {
    return this.#store.flows.retry(flowId, opts);
  }

  /**
   * The groups with jobs leased or running now, and how many, most first (what per-group
   * `limits` hold); `queue` for one queue, `limit` 1–1,000 groups (default 100).
   */
  runningGroups(filter: { queue?: string; limit?: number } = {}): Promise<GroupRunning[]> {
    return this.#store.runningGroups(filter);
  }

  /**
   * Cancels a `queued`/`scheduled`/`retry_wait` job at once; for a `leased`/`running` job, aborts
   * its handler's signal and the job ends `cancelled`. False when the job is missing or finished.
   */
  async cancel(uuid: string): Promise<boolean> {
    return (await this.#store.cancel(uuid)) !== 'not_cancellable';
  }

  /**
   * Enqueues a new job copying a dead-lettered one (queue, type, payload, priority, maxAttempts,
   * lockKey, teamId, resourceId) with `retryOfId` = its id. The original stays `dead_letter`.
   * Missing job → `NOT_FOUND`; not in the dead letter → `INVALID_STATE`.
   */
  async retryDeadLetter(uuid: string, opts: { idempotencyKey?: string } = {}): Promise<Job> {
    const retry = deadLetterRetry(await this.#store.get(uuid));
    return this.enqueue({ ...retry, ...(opts?.idempotencyKey !== undefined ? { idempotencyKey: opts.idempotencyKey } : {}) });
  }

  /** Moves a dead-lettered job to `cancelled`; false when it is missing or not in the dead letter. */
  forgetDeadLetter(uuid: string): Promise<boolean> {
    return this.#store.forgetDeadLetter(uuid);
  }

  /** Deletes `succeeded`/`cancelled` jobs finished more than `olderThanMs` ago; returns the count. */
  purgeFinished(olderThanMs: number): Promise<number> {
    return this.#store.purgeFinished(olderThanMs);
  }

  /**
   * Creates or replaces (by `name`) a recurring job: every worker fires it (unless started with
   * `schedules: false`), exactly one job per slot across all processes, each job's payload
   * carrying its slot as `scheduledFor`. Replacing a schedule with the same pattern and time zone
   * keeps its next fire time and last slot (calling this at every start is safe); a change
   * applies from the next slot on. Bad input → `INVALID_ARGUMENT`, nothing written.
   */
  schedule(opts: ScheduleOptions): Promise<ScheduleInfo> {
    return upsertSchedule(this.#store, opts);
  }

  /** Deletes the schedule `name` (no worker enqueues for it from then on); false when there was none. */
  unschedule(name: string): Promise<boolean> {
    return this.#store.deleteSchedule(name);
  }

  /**
   * Pauses the schedule `name`: no worker enqueues a slot of it until {@link JobQueue.resumeSchedule}
   * (jobs already enqueued stay). Pausing a paused schedule changes nothing. Unknown name → `NOT_FOUND`.
   */
  async pauseSchedule(name: string): Promise<ScheduleInfo> {
    const s = await this.#store.pauseSchedule(name);
    if (s === null) throw new QError(QErrorCode.NOT_FOUND, 'pauseSchedule: schedule not found');
    return s;
  }

  /**
   * Resumes the paused schedule `name` at its pattern's first slot after now: the slots of the
   * paused time are not enqueued, whatever its `backfill`. Resuming a running schedule changes
   * nothing. Unknown name → `NOT_FOUND`.
   */
  async resumeSchedule(name: string): Promise<ScheduleInfo> {
    const s = await resumeStoredSchedule(this.#store, name);
    if (s === null) throw new QError(QErrorCode.NOT_FOUND, 'resumeSchedule: schedule not found');
    return s;
  }

  /** Every schedule, by name, with its next fire time, last slot and whether it is paused (`pausedAt`). */
  schedules(): Promise<ScheduleInfo[]> {
    return this.#store.listSchedules();
  }

  #toNewJob(opts: EnqueueOptions, traceparent: string | undefined): NewJob {
    if (!opts || typeof opts !== 'object') throw invalidArgument('enqueue takes EnqueueOptions');
    if (opts.queue !== undefined && opts.queue !== null && typeof opts.queue !== 'string') {
      throw invalidArgument('queue must be a string');
    }
    const queue = opts.queue || 'default';
    // An opened queue takes any queue name: an unserved one is counted and warned about instead.
    if (!this.#managed && !this.#known.includes(queue)) {
      throw new QError(QErrorCode.UNKNOWN_QUEUE, `queue: "${queue}" is not consumed by any worker (known: [${this.#known.join(' ')}])`);
    }
    if (typeof opts.type !== 'string') throw invalidArgument('type must be a string');
    // Field by field (the store reads no others): an object rest and spread per job were a
    // measurable share of a batch enqueue.
    return {
      queue,
      type: opts.type,
      payload: traceparent === undefined ? opts.payload : withTraceparent(opts.payload, traceparent),
      priority: opts.priority,
      runAt: opts.runAt,
      maxAttempts: opts.maxAttempts,
      idempotencyKey: opts.idempotencyKey,
      jobKey: opts.jobKey,
      jobKeyMode: opts.jobKeyMode,
      throttleMs: opts.throttleMs,
      lockKey: opts.lockKey,
      group: opts.group,
      teamId: opts.teamId,
      resourceId: opts.resourceId,
      retryOfId: opts.retryOfId,
    };
  }
}
