import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Tracer } from '@opentelemetry/api';
import type { JobMetrics } from '@q/otel';
import { QError, QErrorCode, checkName, invalidArgument } from '@q/schema';
import { outcomeProblem, type Job, type JobListener, type JobOutcome, type JobStore, type LeasedJob } from '@q/store/jobs';
import { retryBackoffMs } from './backoff.js';
import { Completer } from './completer.js';
import { LEASE_DURATION_MS, RETRY_BASE_MS } from './constants.js';
import { DeadLetterError, JobAbortedError } from './errors.js';
import { Execution } from './execution.js';
import { LeaseKeeper } from './lease-keeper.js';
import { errorFields, firstLine, silentLogger, type Logger } from './logger.js';
import { FailureWatch, MAX_PERSISTENT_FAILURES, type WorkerFailure } from './failure-watch.js';
import { Maintenance } from './maintenance.js';
import { processSpan } from './process-span.js';
import type { StepRecorder } from './step-recorder.js';
import { MAX_TIMER_MS, timerOption } from './timers.js';

/** What a handler gets besides the job: an abort signal and the attempt's step timeline. */
export interface HandlerContext {
  /**
   * Aborted when the job's lease is lost, when the job is cancelled, or when a drain times out;
   * `signal.reason` is a {@link JobAbortedError}. The lease counts as lost when a renewal finds it
   * taken, when this worker claims the job again (its lease lapsed), or when renewals kept failing
   * until a sixth of the lease was left (so the handler can stop before anyone else may claim the
   * job). Not aborted when the worker merely stops claiming: a job that finishes within the drain
   * timeout is recorded.
   */
  signal: AbortSignal;
  steps: StepRecorder;
}

/**
 * Runs one attempt of a job. Resolve with a result (stored as JSON; non-serialisable → null) or
 * throw/reject to fail the attempt (retried with backoff, dead-lettered after `maxAttempts`; a
 * {@link DeadLetterError} dead-letters it at once).
 * It must be idempotent: a job whose worker died is run again.
 */
export type HandlerFunc = (job: Job, ctx: HandlerContext) => Promise<unknown>;

/** Options of {@link Worker}. */
export interface WorkerOptions {
  /** Queues to claim from (one global order across them: priority DESC, run_at, id). */
  queues: string[];
  /** Jobs run at once (at least 1). */
  concurrency: number;
  /** Structured logger (pino-compatible). Default: silent. */
  logger?: Logger;
  /** Instruments from `jobMetrics(meterProvider)` of `@q/otel`. Default: none recorded. */
  metrics?: JobMetrics;
  /**
   * Records a `q.jobs.process` span per attempt, linked to the producer's span when the payload
   * carries a W3C `traceparent` (see `JobQueue.enqueue`). Default: none.
   */
  tracer?: Tracer;
  /** First retry delay (doubles per attempt, capped at 5 min). Default 5 s. */
  retryBaseMs?: number;
  /**
   * Lease duration; renewed every third of it. Default {@link LEASE_DURATION_MS} (90 s). At
   * least 100 ms and below 2³¹−1 ms, as every timer option.
   */
  leaseDurationMs?: number;
  /**
   * Idle polling interval, the fallback when no notification arrives. Default 1 s, or 250 ms
   * when the store cannot LISTEN (`pooler: 'transaction'` without `listenDsn`).
   */
  pollIntervalMs?: number;
  /**
   * How often the maintenance holder reaps lapsed leases and promotes due jobs. Default 1 s. A
   * draining worker hands the maintenance over at once.
   */
  maintenanceIntervalMs?: number;
  /** Crashes a job survives; the next one dead-letters it. Default 3. */
  maxResumes?: number;
  /**
   * Called for every database failure of the claim loop or the maintenance (see
   * {@link WorkerFailure}); persistent ones are also logged at error level at once.
   */
  onError?: (failure: WorkerFailure) => void;
  /**
   * Identical persistent failures in a row (permission denied, undefined table, read-only…)
   * after which the worker stops claiming and `run()` rejects with that error. Default 5.
   */
  maxPersistentFailures?: number;
  /**
   * Jobs kept leased ahead of the free slots (a local queue). Default 0: claim only for free
   * slots. With N > 0 one round trip claims up to `concurrency + N` jobs; a slot that frees up
   * starts the next prefetched job at once, without a round trip, and the finished outcomes and
   * the refill ride on one statement once half the local queue is used up (or 20 ms after an
   * outcome if fewer finish). Prefetched jobs hold real leases (fencing tokens, renewed with the
   * running ones) and are `running` in the table from the claim on, as every job a worker claims
   * is (nothing distinguishes `leased` from `running` for lock keys, reaping or cancel). They are
   * claimed in priority order, but a job enqueued later with a higher priority does not overtake
   * them. On stop every prefetched job not yet started goes back to the queue at once, its
   * attempt given back; a cancel of one ends it `cancelled` without running its handler.
   */
  prefetch?: number;
  /** Jobs claimed per statement at most. Default: `concurrency + prefetch`. */
  claimBatchSize?: number;
  /**
   * Worker id stored in `leased_by`: a non-empty string without NUL, at most 2,048 UTF-8 bytes.
   * Default `<hostname>-<pid>-<8 hex>`.
   */
  workerId?: string;
}

/** Longest wait of a stopping worker for its maintenance lease to be released. */
const HANDOVER_WAIT_MS = 500;
/** Default poll interval of a store without notifications: the worst-case wake-up latency. */
const POLL_WITHOUT_LISTEN_MS = 250;
/** With prefetch, how long a finished attempt's outcome waits for a round trip to ride on. */
const PREFETCH_FLUSH_MS = 20;
/** Shortest lease accepted: its renewal and watch timers stay well above the timer resolution. */
const MIN_LEASE_MS = 100;

type State = 'new' | 'running' | 'stopping' | 'stopped';

/**
 * Consumes jobs with bounded concurrency. It claims several jobs per statement, marks them
 * running, renews their leases in one statement every third of the lease, and writes outcomes in
 * batches, every write fenced by the lease token. Idle, it waits for a notification (LISTEN) or
 * its poll interval. One worker per job table at a time (a lease row) reaps lapsed leases and
 * promotes due jobs.
 */
export class Worker {
  /** The id stored in `leased_by` of the jobs this worker holds. */
  readonly id: string;
  readonly #store: JobStore;
  readonly #queues: string[];
  readonly #concurrency: number;
  readonly #batch: number;
  readonly #prefetch: number;
  /** Prefetched executions not yet started, in claim order. */
  #buffer: Execution[] = [];
  readonly #logger: Logger;
  readonly #metrics: JobMetrics | undefined;
  readonly #tracer: Tracer | undefined;
  readonly #retryBaseMs: number;
  readonly #leaseMs: number;
  readonly #pollMs: number;
  readonly #handlers = new Map<string, HandlerFunc>();
  /** Every attempt in flight, by lease token: a stale attempt stays here until it settles. */
  readonly #executions = new Map<string, Execution>();
  /** The latest attempt of each job in flight (cancel notifications name the job). */
  readonly #current = new Map<number, Execution>();
  readonly #completer: Completer;
  readonly #leases: LeaseKeeper;
  #state: State = 'new';
  #busy = 0;
  #workSignal = false;
  #waiter: (() => void) | undefined;
  #listener: JobListener | undefined;
  readonly #maintenance: Maintenance;
  readonly #watch: FailureWatch;
  #loop: Promise<void> | undefined;
  #loopDone = false;
  /** The claim loop waits for work (or after an error): it will not take outcomes soon. */
  #waitingForWork = false;
  /** Callers of wait() waiting for the last execution to settle. */
  #drainWaiters: Array<() => void> = [];
  #shutdown: Promise<void> | undefined;

  constructor(store: JobStore, opts: WorkerOptions) {
    if (!store || typeof store.claim !== 'function') throw invalidArgument('store must be a JobStore');
    if (!opts || typeof opts !== 'object') throw invalidArgument('Worker takes WorkerOptions');
    const queues = opts.queues;
    if (!Array.isArray(queues) || queues.length === 0) throw invalidArgument('queues must be a non-empty array of queue names');
    for (const q of queues) checkName('Worker', 'queue name', q);
    if (typeof opts.concurrency !== 'number' || !Number.isFinite(opts.concurrency)) {
      throw invalidArgument('concurrency must be a number');
    }
    this.#store = store;
    this.#queues = [...new Set(queues)];
    this.#concurrency = Math.max(Math.floor(opts.concurrency), 1);
    this.#prefetch = opts.prefetch ?? 0;
    if (!Number.isInteger(this.#prefetch) || this.#prefetch < 0) throw invalidArgument('prefetch must be a non-negative integer');
    this.#batch = positiveInt(opts.claimBatchSize, this.#concurrency + this.#prefetch, 'claimBatchSize');
    this.#logger = opts.logger ?? silentLogger;
    this.#metrics = opts.metrics;
    this.#tracer = opts.tracer;
    this.#retryBaseMs = positive(opts.retryBaseMs, RETRY_BASE_MS, 'retryBaseMs');
    this.#leaseMs = timerOption(opts.leaseDurationMs, LEASE_DURATION_MS, 'leaseDurationMs', MIN_LEASE_MS);
    // Without notifications (a transaction pooler and no listenDsn) polling is all there is.
    this.#pollMs = timerOption(opts.pollIntervalMs, store.notifies === false ? POLL_WITHOUT_LISTEN_MS : 1_000, 'pollIntervalMs');
    const maintenanceMs = timerOption(opts.maintenanceIntervalMs, 1_000, 'maintenanceIntervalMs');
    const maxResumes = opts.maxResumes ?? 3;
    if (!Number.isInteger(maxResumes) || maxResumes < 0) throw invalidArgument('maxResumes must be a non-negative integer');
    this.id = opts.workerId === undefined ? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}` : checkName('Worker', 'workerId', opts.workerId);
    // Outcomes wait for the claim loop's next round trip while it is active: it is either
    // writing one now or about to (a finished attempt frees a slot, which wakes it).
    this.#completer = new Completer(store, this.#logger, () => this.#state === 'running' && !this.#waitingForWork && !this.#loopDone);
    this.#leases = new LeaseKeeper(store, this.#leaseMs, this.#logger, {
      held: () => [...this.#executions.values()].filter((e) => e.held),
      lost: (e, unrenewed) => this.#leaseLost(e, unrenewed),
      cancelRequested: (e) => this.#cancel(e),
    });
    this.#watch = new FailureWatch({
      logger: this.#logger, metrics: this.#metrics, onError: opts.onError, stop: () => this.#requestStop(),
      maxPersistent: positiveInt(opts.maxPersistentFailures, MAX_PERSISTENT_FAILURES, 'maxPersistentFailures'),
    });
    this.#maintenance = new Maintenance(store, this.id, maxResumes, maintenanceMs, this.#logger, {
      failed: (err) => void this.#watch.failed('maintenance', err),
      succeeded: () => this.#watch.succeeded('maintenance'),
      promoted: () => this.#wake(),
    });
  }

  /** Binds a job type to its handler (registering a type again replaces it). */
  register(type: string, handler: HandlerFunc): void {
    if (typeof type !== 'string') throw invalidArgument('type must be a string');
    if (typeof handler !== 'function') throw invalidArgument('handler must be a function');
    this.#handlers.set(type, handler);
  }

  /**
   * Claims and runs jobs until `signal` aborts; resolves once claiming has stopped. Jobs in flight
   * keep running: call {@link Worker.wait} to drain them. A worker runs once.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (!signal || typeof signal.aborted !== 'boolean') throw invalidArgument('run takes an AbortSignal');
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
    this.#maintenance.start();
    this.#loop = this.#claimLoop();
    await this.#loop;
    // Nothing left in flight: release the listener and timers now (so the process can exit even
    // if nobody calls wait()); otherwise the last job to finish does it.
    if (this.#executions.size === 0) await this.#finish();
    if (this.#watch.fatal) throw this.#watch.fatal;
  }

  /**
   * Stops claiming (as if `run`'s signal aborted) and waits until every job in flight has
   * finished and its outcome and steps are recorded, for at most `timeoutMs` (a claim statement
   * still in flight is not waited for; what it returns goes straight back to the queue). Jobs
   * whose handler still runs then have their signal aborted and go back to the queue at once,
   * the attempt given back; outcomes already handed in are still written (and awaited: retried
   * while their lease holds). `timeoutMs` of 2³¹−1 or more (or `Infinity`) waits without a
   * bound. Resolves immediately if the worker never ran. Several callers may wait at once.
   */
  async wait(timeoutMs: number): Promise<void> {
    if (typeof timeoutMs !== 'number' || Number.isNaN(timeoutMs) || timeoutMs < 0) {
      throw invalidArgument('timeoutMs must be a non-negative number of milliseconds');
    }
    if (this.#state === 'new') return;
    this.#requestStop();
    let timer: NodeJS.Timeout | undefined;
    const drained = (async () => {
      await this.#loop;
      await this.#whenDrained();
      return false;
    })();
    const timedOut = await Promise.race([
      drained,
      new Promise<boolean>((resolve) => {
        // Beyond the timer range Node would fire at once: such a bound is no bound.
        if (timeoutMs < MAX_TIMER_MS) timer = setTimeout(() => resolve(true), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      await this.#giveBack();
      await this.#whenDrained();
    }
    await this.#finish();
  }

  #requestStop(): void {
    if (this.#state !== 'running') return;
    this.#state = 'stopping';
    this.#logger.info({ worker_id: this.id, in_flight: this.#executions.size }, 'worker stopping');
    void this.#maintenance.stop();
    this.#waiter?.();
    this.#completer.kick();
    void this.#releaseBuffered();
  }

  #listen(): JobListener {
    return this.#store.listen({
      onNotification: (n) => {
        if (n.kind === 'queued') {
          if (this.#queues.includes(n.queue)) this.#wake();
        } else {
          this.#cancelRequested(n.id);
        }
      },
      onConnected: () => this.#wake(),
      onError: (err) => {
        if (this.#state === 'running') this.#logger.warn(errorFields(err), 'job listener connection failed, polling');
      },
    });
  }

  get #stopping(): boolean {
    return this.#state !== 'running';
  }

  // --- claiming -------------------------------------------------------------------------------

  async #claimLoop(): Promise<void> {
    let soloClaim = false;
    let retryShort = false;
    while (!this.#stopping) {
      if (this.#prefetch > 0) {
        if (!this.#roundDue()) {
          const waitStarted = performance.now();
          await this.#idle(() => this.#roundDue(), PREFETCH_FLUSH_MS);
          if (this.#stopping) break;
          // Outcomes waited long enough: write them (and refill what room there is).
          const flush = performance.now() - waitStarted >= PREFETCH_FLUSH_MS && this.#completer.pending > 0;
          if (!this.#roundDue() && !flush) continue;
        }
      } else if (this.#concurrency - this.#busy <= 0) {
        await this.#idle(() => this.#busy < this.#concurrency);
        continue;
      }
      // Let every handler that settles in this turn free its slot and hand in its outcome, so one
      // round trip carries them all and claims all their replacements.
      await nextTurn();
      if (this.#stopping) break;
      const limit = Math.min(this.#room(), this.#batch);
      if (limit <= 0 && (this.#prefetch === 0 || this.#completer.pending === 0)) continue;
      this.#workSignal = false;
      const taken = soloClaim ? [] : this.#completer.take();
      soloClaim = false;
      let jobs: LeasedJob[];
      // The leases start no earlier than the statement is sent (the database times them).
      const sentAt = performance.now();
      try {
        // Claimed straight into `running`: handlers start at once, so a separate mark-running
        // write would only add a commit. The finished attempts' outcomes ride along: the steady
        // state costs one statement (one commit) per batch, not a claim plus a completion.
        const claim = { queues: this.#queues, workerId: this.id, limit, leaseMs: this.#leaseMs, start: true };
        if (taken.length > 0 && limit <= 0) {
          const written = await this.#store.complete(taken.map((p) => p.outcome));
          this.#completer.settle(taken, written);
          jobs = [];
        } else if (taken.length > 0) {
          const r = await this.#store.completeAndClaim(taken.map((p) => p.outcome), claim);
          this.#completer.settle(taken, r.written);
          jobs = r.jobs;
        } else {
          jobs = await this.#store.claim(claim);
        }
      } catch (err) {
        if (taken.length > 0) {
          // The outcomes are written on their own (one by one if need be); claim alone next.
          this.#completer.restore(taken);
          soloClaim = true;
          if (!this.#stopping) this.#logger.warn(errorFields(err), 'complete-and-claim failed, writing outcomes alone');
          continue;
        }
        if (this.#stopping) break;
        const retryMs = this.#watch.failed('claim', err);
        if (retryMs === null) break;
        await this.#idleNotTaking(() => false, retryMs);
        continue;
      }
      this.#watch.succeeded('claim');
      if (jobs.length > 0) await this.#start(jobs, sentAt);
      // A short batch means the queues are drained: wait for a notification or the poll. After a
      // round that also wrote outcomes, look once more first: a lock key an outcome released was
      // still held in that round's snapshot.
      if (limit > 0 && jobs.length < limit) {
        if (taken.length > 0 && !retryShort) retryShort = true;
        else {
          retryShort = false;
          await this.#idleNotTaking(() => this.#workSignal, this.#pollMs);
        }
      } else retryShort = false;
    }
    this.#loopDone = true;
    this.#completer.kick();
  }

  /**
   * {@link Worker.#idle} while the claim loop waits for work or after an error: outcomes
   * submitted meanwhile are written on their own instead of waiting for the next claim.
   */
  async #idleNotTaking(ready: () => boolean, timeoutMs: number): Promise<void> {
    this.#waitingForWork = true;
    this.#completer.kick();
    try {
      await this.#idle(ready, timeoutMs);
    } finally {
      this.#waitingForWork = false;
    }
  }

  /** Waits until `ready()` holds after a wake-up, the timeout passes, or the worker stops. */
  #idle(ready: () => boolean, timeoutMs?: number): Promise<void> {
    if (this.#stopping || ready()) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiter = undefined;
        resolve();
      };
      const timer = timeoutMs === undefined ? undefined : setTimeout(done, timeoutMs);
      this.#waiter = () => {
        if (this.#stopping || ready()) done();
      };
    });
  }

  #wake(): void {
    this.#workSignal = true;
    this.#waiter?.();
  }

  /** Slots free plus prefetch room: how many jobs the next claim may take. */
  #room(): number {
    return this.#concurrency - this.#busy + this.#prefetch - this.#buffer.length;
  }

  /**
   * With prefetch: a round trip is worth its commit once half the local queue (or, for a small
   * one, at least one job) has room, or as many outcomes wait — or at once when a slot idles
   * with nothing prefetched.
   */
  #roundDue(): boolean {
    const half = Math.max(1, Math.ceil(this.#prefetch / 2));
    if (this.#busy < this.#concurrency && this.#buffer.length === 0) return true;
    return this.#room() >= half || this.#completer.pending >= half;
  }

  async #start(jobs: LeasedJob[], sentAt: number): Promise<void> {
    if (this.#stopping) {
      const leases = jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken }));
      await this.#store.release(leases).catch((err: unknown) => this.#logger.warn(errorFields(err), 'could not give back jobs'));
      return;
    }
    for (const job of jobs) {
      this.#metrics?.claimed.add(1, { 'job.queue': job.queue });
      this.#buffer.push(this.#track(job, sentAt));
    }
    // A claim never returns a job ahead of one buffered earlier in claim order except by
    // priority or run_at: keep the local queue in claim order across rounds.
    if (this.#buffer.length > jobs.length) this.#buffer.sort((a, b) => claimOrder(a.job, b.job));
    this.#startBuffered();
  }

  /** Starts prefetched jobs in the free slots (no round trip). */
  #startBuffered(): void {
    while (this.#busy < this.#concurrency && this.#buffer.length > 0 && !this.#stopping) {
      const e = this.#buffer.shift()!;
      e.state = 'running';
      this.#busy++;
      void this.#execute(e);
    }
  }

  /** Gives every prefetched job not yet started back to the queue at once (attempt given back). */
  async #releaseBuffered(): Promise<void> {
    const left = this.#buffer;
    this.#buffer = [];
    if (left.length === 0) return;
    for (const e of left) e.released = true;
    try {
      const released = await this.#store.release(left.map((e) => e.lease));
      this.#logger.info({ worker_id: this.id, released: released.length }, 'prefetched jobs returned to the queue');
    } catch (err) {
      this.#logger.error(errorFields(err), 'prefetched jobs could not be returned; their leases will lapse');
    }
    for (const e of left) this.#settle(e);
  }

  /** Drops a prefetched execution from the local queue; false if it had started. */
  #unbuffer(e: Execution): boolean {
    if (e.state !== 'buffered') return false;
    const i = this.#buffer.indexOf(e);
    if (i >= 0) this.#buffer.splice(i, 1);
    return true;
  }

  #track(job: LeasedJob, sentAt: number): Execution {
    const e = new Execution(job, sentAt + this.#leaseMs, (l) => (steps) => this.#store.updateSteps(l, steps).catch(() => false));
    // The job is ours again under a new lease: the earlier one lapsed, so an attempt still running
    // under it is stale. It is aborted now and stays tracked (for wait()) until it settles.
    const stale = this.#current.get(job.id);
    if (stale) this.#leaseLost(stale);
    this.#executions.set(job.leaseToken, e);
    this.#current.set(job.id, e);
    return e;
  }

  /** The handler settled (or will never run): frees its slot, once. */
  #free(e: Execution): void {
    if (e.state !== 'running' && e.state !== 'buffered') return;
    const started = e.state === 'running';
    e.state = 'recording';
    if (started) {
      this.#busy--;
      this.#startBuffered();
    }
    this.#waiter?.();
  }

  /** Forgets the execution (freeing its slot if it still held one). */
  #settle(e: Execution): void {
    if (e.state === 'done') return;
    this.#free(e);
    e.state = 'done';
    this.#executions.delete(e.job.leaseToken);
    if (this.#current.get(e.job.id) === e) this.#current.delete(e.job.id);
    if (this.#executions.size === 0) {
      for (const resolve of this.#drainWaiters.splice(0)) resolve();
      if (this.#state === 'stopping' && this.#loopDone) void this.#finish();
    }
  }

  // --- one attempt ----------------------------------------------------------------------------

  async #execute(e: Execution): Promise<void> {
    const { job } = e;
    const handler = this.#handlers.get(job.type);
    if (!handler) {
      const msg = `no handler registered for job type "${job.type}"`;
      this.#free(e);
      await this.#record(e, this.#storable(e, this.#failure(e, msg)), undefined, msg);
      this.#settle(e);
      return;
    }
    const started = performance.now();
    let outcome: JobOutcome;
    let error: string | undefined;
    let deadLetter = false;
    try {
      const run = async (): Promise<unknown> => {
        try {
          return await handler(job, { signal: e.controller.signal, steps: e.recorder });
        } catch (err) {
          // Postgres text holds no NUL and UTF-8 no lone surrogate: replaced, so the error is kept.
          error = storableText(err instanceof Error ? err.message : String(err));
          deadLetter = err instanceof DeadLetterError;
          // The span records only the first line: messages can be long and are the handler's.
          throw new Error(firstLine(error || 'job failed'), { cause: err });
        }
      };
      const result = this.#tracer ? await processSpan(this.#tracer, job, run) : await run();
      outcome = { ...e.lease, status: 'succeeded', result };
    } catch {
      outcome = this.#failure(e, error ?? 'job failed', deadLetter);
    }
    this.#free(e);
    if (e.cancelRequested) outcome = { ...e.lease, status: 'cancelled', ...(error !== undefined ? { error } : {}) };
    outcome = this.#storable(e, outcome);
    if ('error' in outcome && outcome.error !== undefined) error = outcome.error;
    const status = outcome.status === 'retry_wait' ? 'failed' : outcome.status;
    const attrs = { 'job.type': job.type, 'job.status': status };
    this.#metrics?.completed.add(1, attrs);
    this.#metrics?.duration.record((performance.now() - started) / 1000, attrs);
    await this.#record(e, outcome, status, error);
    this.#settle(e);
  }

  /**
   * The outcome as the store will take it. One it would refuse (a result JSON cannot carry
   * faithfully — a Map, a Set, NUL… — or over 64 MiB; an error text over 64 MiB) becomes a failed
   * attempt saying why, retried like a thrown error: otherwise it could not be recorded at all,
   * the job would sit `running` until its lease lapsed, and it could fail the batch it rides in.
   * Checked by the store's own rule ({@link outcomeProblem}); the message never quotes the value.
   */
  #storable(e: Execution, outcome: JobOutcome): JobOutcome {
    const problem = outcomeProblem(outcome);
    return problem === undefined ? outcome : this.#refused(e, outcome, problem);
  }

  /** What is recorded instead of `outcome`, which the store refuses for `problem`. */
  #refused(e: Execution, outcome: JobOutcome, problem: string): JobOutcome {
    const what = /^steps\b/.test(problem) ? 'step timeline' : outcome.status === 'succeeded' ? 'result' : 'error';
    const message = `the handler's ${what} cannot be stored: ${problem}`;
    // A failure or cancel keeps its status (and retry delay) with the error replaced.
    return outcome.status === 'succeeded' ? this.#failure(e, message) : { ...outcome, error: message };
  }

  #failure(e: Execution, message: string, deadLetter = false): JobOutcome {
    const { job } = e;
    return deadLetter || job.attempt >= job.maxAttempts
      ? { ...e.lease, status: 'dead_letter', error: message }
      : { ...e.lease, status: 'retry_wait', error: message, retryDelayMs: retryBackoffMs(job.attempt, this.#retryBaseMs) };
  }

  /**
   * Writes the outcome with the final timeline, unless the job was given back by a drain or its
   * lease is known lost (then someone else owns the job, or soon will: nothing is recorded).
   */
  async #record(e: Execution, outcome: JobOutcome, status: string | undefined, error: string | undefined): Promise<void> {
    if (e.released) return;
    const fields = this.#jobFields(e.job);
    // Should the store still refuse the outcome when it is written (a timeline over 64 MiB), a
    // failed attempt saying why is recorded instead, without the timeline.
    const submitted = outcome;
    const written = !e.leaseLost && (await this.#completer.submit({ ...outcome, steps: e.recorder.steps }, () => e.held, (problem) => {
      outcome = this.#refused(e, submitted, problem);
      if ('error' in outcome) error = outcome.error;
      return outcome;
    }));
    if (!written) {
      this.#logger.warn(fields, e.leaseLost ? 'job outcome not recorded: its lease was lost' : 'could not record job outcome (lease lost?)');
      if (e.unrenewed) await this.#giveUp(e);
      return;
    }
    switch (outcome.status) {
      case 'succeeded':
        this.#logger.info(fields, 'job succeeded');
        break;
      case 'retry_wait':
        this.#logger.warn({ ...fields, err: { message: firstLine(error ?? '') }, retry_in_ms: Math.round(outcome.retryDelayMs) }, 'job attempt failed, will retry');
        break;
      case 'dead_letter':
        this.#logger.error({ ...fields, err: { message: firstLine(error ?? '') } }, 'job dead-lettered');
        break;
      default:
        this.#logger.info({ ...fields, status }, 'job cancelled');
    }
  }

  #jobFields(job: Job): Record<string, unknown> {
    return { job_uuid: job.uuid, job_type: job.type, attempt: job.attempt, worker_id: this.id };
  }

  // --- leases ---------------------------------------------------------------------------------

  /** The lease is known lost: the handler is told to stop, and nothing more is recorded for it. */
  #leaseLost(e: Execution, unrenewed = false): void {
    if (e.leaseLost || e.state === 'done') return;
    e.leaseLost = true;
    e.unrenewed = unrenewed;
    if (e.state === 'running' || e.state === 'buffered') this.#metrics?.leaseLost.add(1, { 'job.type': e.job.type });
    if (e.state === 'running') {
      this.#logger.warn(this.#jobFields(e.job), unrenewed ? 'job lease could not be renewed in time; aborting its handler' : 'job lease lost; aborting its handler');
    }
    e.controller.abort(new JobAbortedError('lease_lost'));
    if (this.#unbuffer(e)) {
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
      if ((await this.#store.release([e.lease])).length > 0) this.#logger.info(this.#jobFields(e.job), 'unrenewed job returned to the queue');
    } catch {
      // The database is out of reach: the lease lapses and the job is reaped, as after a crash.
    }
  }

  #cancelRequested(id: number): void {
    const e = this.#current.get(id);
    if (e?.held) this.#cancel(e);
  }

  #cancel(e: Execution): void {
    if (e.cancelRequested) return;
    e.cancelRequested = true;
    if (this.#unbuffer(e)) {
      // Prefetched, not started: its handler never runs.
      if (e.released) return;
      void (async () => {
        this.#free(e);
        this.#metrics?.completed.add(1, { 'job.type': e.job.type, 'job.status': 'cancelled' });
        await this.#record(e, { ...e.lease, status: 'cancelled' }, 'cancelled', undefined);
        this.#settle(e);
      })();
      return;
    }
    this.#logger.info(this.#jobFields(e.job), 'job cancel requested; aborting its handler');
    e.controller.abort(new JobAbortedError('cancelled'));
  }

  // --- drain ----------------------------------------------------------------------------------

  #whenDrained(): Promise<void> {
    if (this.#executions.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /**
   * Aborts the handlers that still run and returns their jobs to the queue at once (attempt
   * given back). An attempt whose handler has finished keeps its lease: its outcome is being
   * written, and giving the job back would run it again.
   */
  async #giveBack(): Promise<void> {
    const unfinished = [...this.#executions.values()].filter((e) => e.state === 'running' || e.state === 'buffered');
    // A stale attempt (lease lost) has nothing to give back or record: stop waiting for it.
    for (const e of unfinished) if (e.leaseLost) this.#settle(e);
    const left = unfinished.filter((e) => e.held);
    if (left.length === 0) return;
    for (const e of left) {
      e.released = true;
      e.controller.abort(new JobAbortedError('shutdown'));
    }
    try {
      const released = await this.#store.release(left.map((e) => e.lease));
      this.#logger.warn({ worker_id: this.id, released: released.length }, 'drain timed out; unfinished jobs returned to the queue');
    } catch (err) {
      this.#logger.error(errorFields(err), 'drain timed out and unfinished jobs could not be returned; their leases will lapse');
    }
    for (const e of left) this.#settle(e);
  }

  #finish(): Promise<void> {
    this.#shutdown ??= (async () => {
      this.#state = 'stopped';
      this.#leases.stop();
      // Release the maintenance lease before the caller may close the store (a fresh leader need
      // not wait it out), but not longer than a bound: a round blocked on a lock holds the lease
      // row too, and the lease then simply expires.
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, HANDOVER_WAIT_MS)));
      await Promise.all([Promise.race([this.#maintenance.stop(), bound]), this.#listener?.close()]);
      clearTimeout(timer);
      this.#logger.info({ worker_id: this.id }, 'worker stopped');
    })();
    return this.#shutdown;
  }
}

/** Resolves after the current turn of the event loop (pending promise reactions and I/O callbacks). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function claimOrder(a: Job, b: Job): number {
  return b.priority - a.priority || a.runAt.getTime() - b.runAt.getTime() || a.id - b.id;
}

function positive(v: number | undefined, dflt: number, what: string): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw invalidArgument(`${what} must be a positive number`);
  return v;
}

function positiveInt(v: number | undefined, dflt: number, what: string): number {
  if (v === undefined || v === null) return dflt;
  if (!Number.isInteger(v) || v < 1) throw invalidArgument(`${what} must be a positive integer`);
  return v;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** `text` with what Postgres text cannot hold (NUL, a lone surrogate) replaced by U+FFFD, visibly. */
function storableText(text: string): string {
  return text.replaceAll('\u0000', '\ufffd').replace(LONE_SURROGATE, '\ufffd');
}
