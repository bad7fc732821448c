import type { JobMetrics } from '@q/otel';
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import type { JobListener, JobStore, LeasedJob } from '@q/store/jobs';
import { AttemptRunner, jobFields } from './attempt.js';
import { ClaimLoop } from './claim-loop.js';
import { Completer } from './completer.js';
import { JobAbortedError } from './errors.js';
import { WorkerEvents, type LeaseLostReason, type WorkerEventListener, type WorkerEventName, type WorkerEventSource } from './events.js';
import { Execution } from './execution.js';
import { WorkerFailureWatch } from './failure-watch.js';
import { InFlight } from './in-flight.js';
import { LeaseKeeper, leaseGuardMs } from './lease-keeper.js';
import { LocalQueue } from './local-queue.js';
import { LocalQueueSize } from './local-queue-size.js';
import { errorFields, type Logger } from './logger.js';
import { Maintenance } from './maintenance.js';
import { workerScheduler, type Scheduler } from './scheduler.js';
import { resolveOptions, type HandlerFunc, type WorkerOptions } from './options.js';
import { timesOut } from './timers.js';
import { returnToQueue, type ReturnContext } from './return-to-queue.js';

export type { HandlerContext, HandlerFunc, WorkerOptions } from './options.js';

/** How long all slots must stall before an adaptive local queue gives jobs back (a GC pause must not). */
const TRIM_STALL_MS = 250;
/** Longest wait of a stopping worker for its maintenance lease to be released. */
const HANDOVER_WAIT_MS = 500;

type State = 'new' | 'running' | 'stopping' | 'stopped';

/**
 * Consumes jobs with bounded concurrency. It claims several jobs per statement, marks them
 * running, renews (every sixth of the lease, in one statement) the leases of jobs held past a
 * sixth of it, and writes outcomes in batches, every write fenced by the lease token. Idle, it
 * waits for a notification (LISTEN) or its poll interval. One worker per job table at a time
 * (advisory lock) reaps lapsed leases and promotes due jobs.
 *
 * The facade of the claim loop, local queue (and its size), one attempt (with the pure retry
 * policy), lease keeping, maintenance and the attempts in flight (one file each); it owns the slots.
 */
export class Worker implements WorkerEventSource {
  /** The id stored in `leased_by` of the jobs this worker holds. */
  readonly id: string;
  readonly #events: WorkerEvents;
  readonly #store: JobStore;
  readonly #queues: string[];
  readonly #concurrency: number;
  /** Prefetched executions not yet started, in claim order. */
  readonly #buffer = new LocalQueue();
  readonly #logger: Logger;
  readonly #returning: ReturnContext;
  readonly #metrics: JobMetrics | undefined;
  readonly #leaseMs: number;
  readonly #handlers = new Map<string, HandlerFunc>();
  /** Every attempt in flight: a stale attempt stays tracked until it settles. */
  readonly #inFlight = new InFlight();
  readonly #completer: Completer;
  readonly #leases: LeaseKeeper;
  readonly #claims: ClaimLoop;
  readonly #attempts: AttemptRunner;
  #state: State = 'new';
  #busy = 0;
  /** When a slot last started or freed (`performance.now()`). */
  #progressAt = 0;
  readonly #sizer: LocalQueueSize;
  #trimTimer: NodeJS.Timeout | undefined;
  #listener: JobListener | undefined;
  readonly #maintenance: Maintenance;
  readonly #scheduler: Scheduler | undefined;
  readonly #watch: WorkerFailureWatch;
  #loop: Promise<void> | undefined;
  #shutdown: Promise<void> | undefined;

  constructor(store: JobStore, opts: WorkerOptions) {
    if (!store || typeof store.claim !== 'function') throw invalidArgument('new Worker: store must be a JobStore');
    const { batch, retryBaseMs, pollMs, maintenanceMs, maxResumes, maxSnoozes, maxPersistentFailures, ...o } = resolveOptions(
      opts,
      store.notifies !== false,
    );
    this.#store = store;
    this.#queues = o.queues;
    this.#concurrency = o.concurrency;
    const sizer = (this.#sizer = new LocalQueueSize(o.concurrency, o.prefetch, () => this.#stalledMs()));
    this.#logger = o.logger;
    const events = (this.#events = new WorkerEvents(o.logger));
    this.#returning = { store, logger: o.logger, workerId: o.workerId, settle: (e) => this.#settle(e) };
    this.#leaseMs = o.leaseMs;
    this.id = o.workerId;
    // Outcomes wait for the claim loop's next round trip while it is active: it is either
    // writing one now or about to (a finished attempt frees a slot, which wakes it).
    this.#watch = new WorkerFailureWatch({
      logger: this.#logger,
      metrics: opts.metrics,
      onError: (failure) => {
        // The event first: an onError that throws is logged by the watch and must not hide it.
        if (events.has('error')) events.emit('error', failure);
        opts.onError?.(failure);
      },
      stop: () => this.#requestStop(),
      maxPersistent: maxPersistentFailures,
    });
    const watch = this.#watch;
    this.#completer = new Completer(store, this.#logger, () => this.#state === 'running' && this.#claims.takingOutcomes, {
      failed: (err) => watch.retryAfter('complete', err),
      succeeded: () => watch.succeeded('complete'),
    });
    this.#claims = new ClaimLoop(
      {
        store,
        completer: this.#completer,
        logger: this.#logger,
        queues: this.#queues,
        workerId: this.id,
        concurrency: this.#concurrency,
        prefetch: sizer,
        batch,
        leaseMs: this.#leaseMs,
        groups: o.groups,
        pollMs,
        watch: this.#watch,
        tracer: opts.tracer,
        metrics: opts.metrics,
      },
      {
        stopping: () => this.#stopping,
        busy: () => this.#busy,
        buffered: () => this.#buffer.length,
        start: (jobs, sentAt) => this.#start(jobs, sentAt),
        reconcile: (claimIds) => this.#reconcile(claimIds),
      },
    );
    this.#attempts = new AttemptRunner(
      {
        handlers: this.#handlers,
        completer: this.#completer,
        logger: this.#logger,
        metrics: opts.metrics,
        tracer: opts.tracer,
        retryBaseMs,
        workerId: this.id,
        handlerTime: (ms) => sizer.handler(ms),
        events,
        snooze: (lease, delayMs, max) => store.snooze(lease, delayMs, max),
        maxSnoozes,
        parents: (job) => store.flows.parents(job.id),
        addFlowNodes: (lease, nodes) => store.flows.addNodes(lease, nodes),
        recordFlowSpan: (lease, traceparent) => store.flows.recordSpan(lease, traceparent),
      },
      {
        free: (e) => this.#free(e),
        settle: (e) => this.#settle(e),
        giveUp: (e) => this.#giveUp(e),
        fenced: (e) => this.#leaseLost(e, 'fenced'),
      },
    );
    this.#metrics = opts.metrics;
    this.#leases = new LeaseKeeper(store, this.#leaseMs, this.#logger, {
      held: () => this.#inFlight.held(),
      lost: (e, unrenewed) => this.#leaseLost(e, unrenewed ? 'unrenewed' : 'fenced'),
      cancelRequested: (e) => this.#cancel(e),
    });
    this.#maintenance = new Maintenance(
      store,
      this.id,
      maxResumes,
      maintenanceMs,
      this.#logger,
      {
        failed: (err) => void this.#watch.retryAfter('maintenance', err),
        succeeded: () => this.#watch.succeeded('maintenance'),
        promoted: () => this.#claims.wake(),
      },
      { tracer: opts.tracer, metrics: opts.metrics },
    );
    this.#scheduler = workerScheduler(store, opts.schedules, this.#logger, {
      failed: (err) => void this.#watch.retryAfter('schedules', err),
      succeeded: () => this.#watch.succeeded('schedules'),
      listening: () => this.#listener?.connected === true,
    });
  }

  /**
   * Listens to this worker's `event` (see `WorkerEventMap`): `job:start`, `job:success`,
   * `job:retry`, `job:snoozed`, `job:dead-letter`, `job:lease-lost`, `error`, `drained`. A listener that throws or
   * rejects is logged and never affects a job. Returns the unsubscribe function. With no listener
   * an event costs one property read.
   */
  on<E extends WorkerEventName>(event: E, listener: WorkerEventListener<E>): () => void {
    return this.#events.on(event, listener);
  }

  /** Binds a job type to its handler (registering a type again replaces it). */
  register(type: string, handler: HandlerFunc): void {
    if (typeof type !== 'string') throw invalidArgument('register: type must be a string');
    if (typeof handler !== 'function') throw invalidArgument('register: handler must be a function');
    this.#handlers.set(type, handler);
  }

  /**
   * Claims and runs jobs until `signal` aborts; resolves once claiming has stopped. Jobs in flight
   * keep running: call {@link Worker.wait} to drain them. A worker runs once.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (!signal || typeof signal.aborted !== 'boolean') throw invalidArgument('run: signal must be an AbortSignal');
    if (this.#state !== 'new') throw new QError(QErrorCode.INVALID_STATE, 'a worker runs once');
    this.#state = 'running';
    if (signal.aborted) {
      this.#state = 'stopped';
      return;
    }
    signal.addEventListener('abort', () => this.#requestStop(), { once: true });
    this.#logger.info({ worker_id: this.id, concurrency: this.#concurrency, queues: this.#queues }, 'worker started');
    this.#listener = this.#listen();
    await this.#listener.start();
    this.#leases.start();
    if (this.#sizer.adaptive) this.#trimTimer = setInterval(() => this.#trim(), TRIM_STALL_MS / 2).unref();
    this.#maintenance.start();
    this.#scheduler?.start();
    this.#loop = this.#claims.run();
    await this.#loop;
    // Nothing left in flight: release the listener and timers now (so the process can exit even
    // if nobody calls wait()); otherwise the last job to finish does it.
    if (this.#inFlight.size === 0) await this.#finish();
    if (this.#watch.fatal) throw this.#watch.fatal;
  }

  /**
   * Stops claiming (as if `run`'s signal aborted) and waits until every job in flight has
   * finished and its outcome and steps are recorded, for at most `timeoutMs` (a claim statement
   * still in flight is not waited for: what it returns goes straight back to the queue, by the
   * store itself once it is closing, so closing it next strands nothing). Jobs
   * whose handler still runs then have their signal aborted and go back to the queue at once,
   * the attempt given back; outcomes already handed in are still written (and awaited: retried
   * while their lease holds). `timeoutMs` of 2³¹−1 or more (or `Infinity`) waits without a
   * bound. Resolves immediately if the worker never ran. Several callers may wait at once.
   */
  async wait(timeoutMs: number): Promise<void> {
    if (typeof timeoutMs !== 'number' || Number.isNaN(timeoutMs) || timeoutMs < 0) {
      throw invalidArgument('wait: timeoutMs must be a non-negative number of milliseconds');
    }
    if (this.#state === 'new') return;
    this.#requestStop();
    const drained = (async () => {
      await this.#loop;
      await this.#inFlight.whenDrained();
    })();
    if (await timesOut(drained, timeoutMs)) {
      await this.#giveBack();
      await this.#inFlight.whenDrained();
    }
    await this.#finish();
  }

  #requestStop(): void {
    if (this.#state !== 'running') return;
    this.#state = 'stopping';
    this.#logger.info({ worker_id: this.id, in_flight: this.#inFlight.size }, 'worker stopping');
    void this.#maintenance.stop();
    void this.#scheduler?.stop();
    this.#claims.poke();
    this.#completer.kick();
    void this.#releaseBuffered();
  }

  #listen(): JobListener {
    return this.#store.listen({
      onNotification: (n) => {
        if (n.kind === 'queued') {
          if (this.#queues.includes(n.queue)) this.#claims.wake();
        } else if (n.kind === 'schedules') {
          this.#scheduler?.wake();
        } else {
          this.#cancelRequested(n.id);
        }
      },
      // Notifications sent while the connection was down are lost: look at once.
      onConnected: () => {
        this.#claims.wake();
        this.#scheduler?.wake();
      },
      onError: (err) => {
        if (this.#state === 'running') this.#logger.warn(errorFields(err), 'job listener connection failed, polling');
      },
    });
  }

  get #stopping(): boolean {
    return this.#state !== 'running';
  }

  /**
   * Records a released flow node's wait from its release to this claim, both on the database
   * clock (runAt is the release, updatedAt the claim), on its first run only: a retry, a resume or
   * a snooze moved runAt since.
   */
  #releaseLatency(job: LeasedJob): void {
    if (job.attempt !== 1 || job.resumeCount !== 0 || job.snoozes !== 0) return;
    this.#metrics?.flowReleaseLatency?.record(Math.max(0, job.updatedAt.getTime() - job.runAt.getTime()) / 1000, { 'job.type': job.type });
  }

  async #start(jobs: LeasedJob[], sentAt: number): Promise<void> {
    if (this.#stopping) {
      const leases = jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken }));
      await this.#store.release(leases).catch((err: unknown) => this.#logger.warn(errorFields(err), 'could not give back jobs'));
      return;
    }
    for (const job of jobs) {
      this.#metrics?.claimed.add(1, { 'job.queue': job.queue });
      if (job.flow?.released === true) this.#releaseLatency(job);
    }
    this.#buffer.push(jobs.map((job) => this.#track(job, sentAt)));
    this.#startBuffered();
  }

  /**
   * Starts prefetched jobs in the free slots (no round trip). A job whose lease has run out, or
   * is within the lease keeper's guard of it (by this process's clock), is never started: after an
   * event-loop block or a SIGSTOP longer than the lease had left, another worker may already have
   * reaped and run it. It goes back to the queue instead (fenced, attempt given back).
   */
  #startBuffered(): void {
    let lapsing: Execution[] | undefined;
    while (this.#busy < this.#concurrency && this.#buffer.length > 0 && !this.#stopping) {
      const e = this.#buffer.shift();
      if (!e) break;
      if (performance.now() >= e.leaseUntil - leaseGuardMs(this.#leaseMs)) {
        e.released = true;
        (lapsing ??= []).push(e);
        continue;
      }
      e.state = 'running';
      this.#busy++;
      this.#progressAt = performance.now();
      void this.#attempts.execute(e);
    }
    if (lapsing) {
      for (const e of lapsing) this.#metrics?.leaseLost.add(1, { 'job.type': e.job.type });
      void returnToQueue(this.#returning, lapsing, {
        level: 'warn',
        returned: 'prefetched jobs whose leases ran out unstarted (event loop blocked or process paused?) returned to the queue',
        failed: 'prefetched jobs whose leases ran out unstarted could not be returned; their leases will lapse',
      });
    }
  }

  /**
   * After claims whose replies were lost: what they leased (which this worker never saw) goes back
   * to the queue, the attempt given back — not a crash, and long before the leases would lapse.
   * Only those claims' leases match (their tokens derive from the claim ids), so a lease of this
   * worker's, or of another process that shares its `workerId`, is never touched.
   */
  async #reconcile(claimIds: string[]): Promise<void> {
    try {
      const released = await this.#store.releaseClaims(this.id, claimIds);
      if (released.length > 0)
        this.#logger.warn(
          { worker_id: this.id, released: released.length },
          'jobs claimed by a claim whose reply was lost returned to the queue',
        );
    } catch (err) {
      this.#logger.warn(errorFields(err), 'could not look for jobs claimed by a claim whose reply was lost; their leases will lapse');
    }
  }

  /**
   * While every slot has stalled for {@link TRIM_STALL_MS}, the adaptive local queue's size falls
   * (see local-queue-size.ts) and the jobs beyond it go back to the queue, for idle peers.
   */
  #trim(): void {
    if (!this.#stopping && this.#stalledMs() >= TRIM_STALL_MS)
      void this.#releaseBuffered(this.#buffer.takeLast(this.#buffer.length - this.#sizer.size));
  }

  /** How long every slot has been busy without one freeing up; 0 while a slot is free. */
  #stalledMs(): number {
    return this.#busy < this.#concurrency ? 0 : performance.now() - this.#progressAt;
  }

  /** Gives prefetched jobs not yet started (all by default) back to the queue at once (attempt given back). */
  async #releaseBuffered(left = this.#buffer.takeAll()): Promise<void> {
    if (left.length === 0) return;
    for (const e of left) e.released = true;
    await returnToQueue(this.#returning, left, {
      level: 'info',
      returned: 'prefetched jobs returned to the queue',
      failed: 'prefetched jobs could not be returned; their leases will lapse',
    });
  }

  #track(job: LeasedJob, sentAt: number): Execution {
    const e = new Execution(job, sentAt + this.#leaseMs, this.#store);
    // The job is ours again under a new lease: the earlier one lapsed, so an attempt still running
    // under it is stale. It is aborted now and stays tracked (for wait()) until it settles.
    const stale = this.#inFlight.latest(job.id);
    if (stale) this.#leaseLost(stale, 'reclaimed');
    this.#inFlight.add(e);
    return e;
  }

  /** The handler settled (or will never run): frees its slot, once. */
  #free(e: Execution): void {
    if (e.state !== 'running' && e.state !== 'buffered') return;
    const started = e.state === 'running';
    e.state = 'recording';
    if (started) {
      this.#busy--;
      this.#progressAt = performance.now();
      this.#startBuffered();
    }
    this.#claims.poke();
  }

  /** Forgets the execution (freeing its slot if it still held one). */
  #settle(e: Execution): void {
    if (e.state === 'done') return;
    this.#free(e);
    e.state = 'done';
    if (!this.#inFlight.forget(e)) return;
    if (this.#events.has('drained')) this.#events.emit('drained', { workerId: this.id });
    if (this.#state === 'stopping' && this.#claims.done) void this.#finish();
  }

  // --- leases ---------------------------------------------------------------------------------

  /** The lease is known lost: the handler is told to stop, and nothing more is recorded for it. */
  #leaseLost(e: Execution, reason: LeaseLostReason): void {
    if (e.leaseLost || e.state === 'done') return;
    const unrenewed = reason === 'unrenewed';
    e.leaseLost = true;
    e.unrenewed = unrenewed;
    if (this.#events.has('job:lease-lost')) this.#events.emit('job:lease-lost', { job: e.job, reason });
    if (e.state === 'running' || e.state === 'buffered') this.#metrics?.leaseLost.add(1, { 'job.type': e.job.type });
    if (e.state === 'running') {
      this.#logger.warn(
        jobFields(e.job, this.id),
        unrenewed ? 'job lease could not be renewed in time; aborting its handler' : 'job lease lost; aborting its handler',
      );
    }
    e.controller.abort(new JobAbortedError('lease_lost'));
    if (this.#buffer.remove(e)) {
      if (unrenewed) void this.#giveUp(e);
      this.#settle(e);
    }
  }

  /**
   * Gives back a lease given up unrenewed, once nothing runs under it: if the database still
   * holds it (only the renewals failed), the job is queued again at once with the attempt given
   * back instead of lapsing and counting as a crash; if not, the fenced write changes nothing.
   */
  async #giveUp(e: Execution): Promise<void> {
    try {
      if ((await this.#store.release([e.lease])).length > 0) this.#logger.info(jobFields(e.job, this.id), 'unrenewed job returned to the queue');
    } catch {
      // The database is out of reach: the lease lapses and the job is reaped, as after a crash.
    }
  }

  #cancelRequested(id: number): void {
    const e = this.#inFlight.latest(id);
    if (e?.held) this.#cancel(e);
  }

  #cancel(e: Execution): void {
    if (e.cancelRequested) return;
    e.cancelRequested = true;
    if (this.#buffer.remove(e)) {
      // Prefetched, not started: its handler never runs.
      if (e.released) return;
      void (async () => {
        this.#free(e);
        await this.#attempts.record(e, { ...e.lease, status: 'cancelled' }, 'cancelled', undefined);
        this.#settle(e);
      })();
      return;
    }
    this.#logger.info(jobFields(e.job, this.id), 'job cancel requested; aborting its handler');
    e.controller.abort(new JobAbortedError('cancelled'));
  }

  // --- drain ----------------------------------------------------------------------------------

  /**
   * Aborts the handlers that still run and returns their jobs to the queue at once (attempt
   * given back). An attempt whose handler has finished keeps its lease: its outcome is being
   * written, and giving the job back would run it again.
   */
  async #giveBack(): Promise<void> {
    const unfinished = this.#inFlight.unfinished();
    // A stale attempt (lease lost) has nothing to give back or record: stop waiting for it.
    for (const e of unfinished) if (e.leaseLost) this.#settle(e);
    const left = unfinished.filter((e) => e.held);
    if (left.length === 0) return;
    for (const e of left) {
      e.released = true;
      e.controller.abort(new JobAbortedError('shutdown'));
    }
    await returnToQueue(this.#returning, left, {
      level: 'warn',
      returned: 'drain timed out; unfinished jobs returned to the queue',
      failed: 'drain timed out and unfinished jobs could not be returned; their leases will lapse',
    });
  }

  #finish(): Promise<void> {
    this.#shutdown ??= (async () => {
      this.#state = 'stopped';
      this.#leases.stop();
      clearInterval(this.#trimTimer);
      // The maintenance lease is released before the caller may close the store, within a bound.
      await Promise.all([this.#maintenance.stopWithin(HANDOVER_WAIT_MS), this.#scheduler?.stop(), this.#listener?.close()]);
      this.#logger.info({ worker_id: this.id }, 'worker stopped');
    })();
    return this.#shutdown;
  }
}
