import { createHash } from 'node:crypto';
import type { Tracer } from '@opentelemetry/api';
import type { MeterProvider } from '@opentelemetry/api';
import { jobGroupMetrics, observeGauge, qTracer } from '@q/otel';
import type { ConnectionPlacement } from '@q/schema';
import { invalidArgument } from '@q/schema';
import { StatementScope, checkName, checkPlacement, namedStatements } from '@q/schema/internal';
import type pg from 'pg';
import { checkJobStoreOptions, type JobStoreFromPoolOptions, type JobStoreOpenOptions } from './options.js';
import type { InTransaction } from '../transaction.js';
import * as leadership from './leadership.js';
import { MAINTENANCE_LEADERSHIP, checkLeaderLease, checkLeadership, type LeaderLease, type LeaderMaintenanceResult } from './leadership.js';
import { ClaimStarts } from './claim-starts.js';
import { GroupClaims } from './group-claims.js';
import { JobListener, type JobListenerHandlers } from './listener.js';
import { FinishWaiters, type WaitForOptions } from './finish-waiters.js';
import { getJobsByUuids } from './sql/get-jobs-by-uuids.js';
import { getJobById, getJobByUuid } from './sql/get-job.js';
import { listJobs } from './sql/list-jobs.js';
import { encodeCursor } from './cursor.js';
import { toJob } from './row.js';
import { cancelJob } from './sql/cancel-job.js';
import { forgetDeadLetter } from './sql/forget-dead-letter.js';
import { purgeFinished } from './sql/purge-finished.js';
import { countBacklog } from './sql/count-backlog.js';
import { countRunningGroups } from './sql/count-running-groups.js';
import { dbNow } from './sql/db-now.js';
import { heartbeatJobs } from './sql/heartbeat-jobs.js';
import { markJobsRunning } from './sql/mark-jobs-running.js';
import { releaseClaims, releaseJobs } from './sql/release-jobs.js';
import { snoozeJob } from './sql/snooze-job.js';
import { updateJobProgress } from './sql/update-job-progress.js';
import { updateJobSteps } from './sql/update-job-steps.js';
import { listenerConnection } from './from-pool.js';
import { checkPool } from '../store-pool.js';
import type {
  ClaimOptions,
  CancelOutcome,
  EnqueueResult,
  Job,
  JobLease,
  GroupRunning,
  JobStatus,
  JobListFilter,
  JobOutcome,
  JobPage,
  LeaseState,
  LeasedJob,
  NewJob,
  ReapedJob,
  SnoozeResult,
  Step,
} from './types.js';
import {
  DEFAULT_MAX_SNOOZES,
  checkClaimId,
  checkJobId,
  checkLease,
  checkLeaseMs,
  checkListFilter,
  checkMaxResumes,
  checkMaxSnoozes,
  checkPurgeAge,
  checkRunningGroupsFilter,
  checkSnoozeDelay,
  checkUuid,
  progressJson,
  splitLeases,
  stepsJson,
} from './validate.js';
import { bindAppPool, checkSchemaOptions, openBoundPool } from './bind.js';
import type { CompleteAndClaimResult } from './ops/claim-complete.js';
import * as claimComplete from './ops/claim-complete.js';
import { closedError, type JobStoreContext } from './ops/context.js';
import { runOperation, type OperationOwner } from '../operation.js';
import * as enqueueOps from './ops/enqueue.js';
import type { MaintenanceResult } from './ops/maintenance.js';
import * as maintenance from './ops/maintenance.js';
import * as schedules from './ops/schedules.js';
import type { DueSchedules, FireResult, ScheduleFire, ScheduleInput, StoredSchedule } from './ops/schedules.js';
import { FlowStore } from './flow-store.js';

/** Crashes a job survives before the reaper dead-letters it (the 4th crash). */
export const DEFAULT_MAX_RESUMES = 3;
export { ENQUEUE_CHUNK } from './ops/enqueue.js';
export type { CompleteAndClaimResult } from './ops/claim-complete.js';
export type { MaintenanceResult } from './ops/maintenance.js';
export { COMPLETE_CHUNK, STATEMENT_TEXT_BUDGET } from './batches.js';
export { CALL_TEXT_LIMIT } from './validate.js';

/** Name of the jobs backlog gauge (`{job}` count per `queue` and `status`). */
export const JOBS_BACKLOG_METRIC = 'q.jobs.backlog';

/**
 * The job table's narrow driver: every operation is one parameterised statement (batched with
 * `unnest` where it takes many jobs), and every write of a lease holder is fenced by the lease's
 * token. `JobQueue` and `Worker` (`@q/job-worker`) are built on it.
 *
 * It owns the connection, listeners and lifecycle. An operation that is a check and one statement
 * (a lease's upkeep, a read, a cancel) is written here; the families that carry a mechanism of
 * their own have a module under ops/: enqueue (statement sizing, key order, job keys), the claim
 * round trip (its connection, the lock-key race retries), maintenance rounds and schedules.
 */
export class JobStore {
  /** The pool the store queries through (closed by {@link JobStore.close} unless it came from {@link JobStore.fromPool}). */
  readonly pool: pg.Pool;
  /** The LISTEN/NOTIFY channel of this job table (one per schema). */
  readonly channel: string;
  /** The channel on which statements that finish jobs of this table notify ({@link JobStore.waitFor} listens on it). */
  readonly finishedChannel: string;
  /** The schema holding the job table (`schema` option, else `current_schema()` at open). */
  readonly schema: string;
  /**
   * The flows of this job table (job graphs: insert, read, wait, cancel, retry, run-time fan-out),
   * see {@link FlowStore}.
   */
  readonly flows: FlowStore;

  readonly #dsn: string | pg.ClientConfig;
  /** How this store runs its operations (span prefix `q.jobs`, its `CLOSED` error). */
  readonly #operations: OperationOwner;
  readonly #applicationName: string;
  readonly #scope: StatementScope;
  readonly #listeners = new Set<JobListener>();
  readonly #placement: ConnectionPlacement;
  /** What the modules under ops/ run with. */
  readonly #ctx: JobStoreContext;
  readonly #waiters: FinishWaiters;
  #unobserve: (() => void) | undefined;
  #closed = false;
  #ownsPool = true;

  private constructor(
    pool: pg.Pool,
    dsn: string | pg.ClientConfig,
    schema: string,
    tracer: Tracer | undefined,
    applicationName: string,
    opts: ConnectionPlacement & { meterProvider?: MeterProvider | undefined },
  ) {
    this.pool = pool;
    this.#placement = { pooler: opts.pooler, listenDsn: opts.listenDsn };
    // Behind a transaction pooler the LISTEN connection must bypass it (listenDsn) or not exist.
    this.#dsn = opts.listenDsn ?? dsn;
    this.schema = schema;
    this.#scope = new StatementScope(schema, { named: namedStatements(opts) });
    const digest = createHash('sha256').update(schema).digest('hex').slice(0, 24);
    this.channel = `q_jobs_${digest}`;
    // The same name migration 0009's trigger q_jobs_notify_finished derives from the schema.
    this.finishedChannel = `q_jobs_done_${digest}`;
    this.#operations = { tracer, spanPrefix: 'q.jobs', closed: () => this.#closed, closedError };
    this.#applicationName = applicationName;
    const starts = new ClaimStarts();
    this.#ctx = {
      pool,
      scope: this.#scope,
      starts,
      groups: new GroupClaims(jobGroupMetrics(opts.meterProvider)),
      channel: this.channel,
      closed: () => this.#closed,
      op: (name, fn, attrs) => this.#op(name, fn, attrs),
      opPuttingBack: async (name, fn, putBack) => {
        const result = await this.#op(name, fn);
        if (putBack(result)) starts.forget();
        return result;
      },
    };
    // Collected on the exporter's schedule; a collection must never fail the exporter.
    this.#unobserve = observeGauge(
      opts.meterProvider,
      JOBS_BACKLOG_METRIC,
      { unit: '{job}', description: 'Jobs per queue and status (scheduled, queued, leased, running, retry_wait, dead_letter)' },
      async () => {
        if (this.#closed) return [];
        try {
          return (await countBacklog(this.#scope, this.pool)).map((r) => ({ value: r.count, attributes: { queue: r.queue, status: r.status } }));
        } catch {
          return [];
        }
      },
    );
    this.flows = new FlowStore(this.#ctx, (uuid, opts) => this.waitFor(uuid, opts));
    this.#waiters = new FinishWaiters({
      read: (uuids) => this.#op('wait_for', () => getJobsByUuids(this.#scope, this.pool, uuids)),
      listen: (handlers) => this.#listenOn(this.finishedChannel, handlers),
      notifies: this.notifies,
    });
  }

  /**
   * Opens a pool on `dsn` (validated; its password never appears in an error) and migrates the
   * `jobs` module into `opts.schema` (created if missing) or, without it, the connection's current
   * schema, unless `opts.migrate` is false.
   */
  static async open(dsn: string, opts: JobStoreOpenOptions = {}): Promise<JobStore> {
    checkJobStoreOptions('JobStore.open', opts);
    checkPlacement('JobStore.open', opts);
    const asked = checkSchemaOptions('JobStore.open', opts);
    const applicationName = opts.applicationName ?? 'q-jobs';
    const { pool, schema } = await openBoundPool(dsn, opts, asked, applicationName);
    return new JobStore(pool, dsn, schema, qTracer(opts.tracerProvider), applicationName, opts);
  }

  /**
   * A store on a pool the application owns (and ends): {@link JobStore.close} closes the store's
   * listeners but not the pool. Migrates the `jobs` module into `opts.schema` or the pool's current
   * schema unless `opts.migrate` is false, as {@link JobStore.open} does. Listeners open their own
   * connection with the pool's connection settings. Statement spans need `instrumentPool`
   * (`@q/otel`) on it.
   */
  static async fromPool(pool: pg.Pool, opts: JobStoreFromPoolOptions = {}): Promise<JobStore> {
    checkPool('JobStore.fromPool', pool);
    checkJobStoreOptions('JobStore.fromPool', opts);
    checkPlacement('JobStore.fromPool', opts);
    const asked = checkSchemaOptions('JobStore.fromPool', opts);
    const schema = await bindAppPool(pool, asked, opts.migrate !== false, opts.pooler);
    const applicationName = opts.applicationName ?? 'q-jobs';
    const store = new JobStore(pool, listenerConnection(pool), schema, qTracer(opts.tracerProvider), applicationName, opts);
    store.#ownsPool = false;
    return store;
  }

  /**
   * Closes every listener and the pool (unless the store came from {@link JobStore.fromPool}).
   * A claim still in flight gives back, on its own connection, whatever it leased (and rejects
   * `CLOSED`), so nothing stays leased to a worker that is gone. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#unobserve?.();
    this.#unobserve = undefined;
    await this.#waiters.close();
    await Promise.all([...this.#listeners].map((l) => l.close()));
    if (this.#ownsPool) await this.pool.end();
  }

  /** The database clock (every process times leases alike). */
  now(): Promise<Date> {
    return this.#op('now', () => dbNow(this.#scope, this.pool));
  }

  /**
   * Inserts jobs; all or none. An idempotency key is held per queue and type: a job whose key is
   * held by a kept job (live or finished) of the same queue and type is not inserted, and that
   * job is returned, unchanged ({@link JobStore.enqueueResults} tells which). The same key in
   * another queue or of another type makes a new job. A `runAt` after the database's now makes the job
   * `scheduled`; otherwise it is `queued` at the database's now. Queued jobs wake idle workers
   * (NOTIFY, delivered at commit). One statement per {@link ENQUEUE_CHUNK} jobs and per
   * {@link STATEMENT_TEXT_BUDGET} characters of payload; several statements share one
   * transaction. Jobs are inserted in idempotency-key order (ids still follow the input order), so
   * concurrent batches sharing keys in any order never deadlock; a deadlock with anything else is
   * retried. Returns the jobs in input order.
   *
   * Rejected with `INVALID_ARGUMENT` before any statement: a queue, type or key that is empty,
   * over 2,048 UTF-8 bytes, or holds NUL or a lone surrogate; a payload
   * JSON cannot carry as given (BigInt, function, symbol, non-finite number, cycle, Map, Set,
   * typed array…; a toJSON or getter that throws; \u0000 or a lone surrogate) or over 64 MiB of
   * JSON; a `runAt` before the year 1.
   *
   * With `{ client }`, the jobs are written through the caller's connection, in its transaction
   * (see {@link InTransaction}): they exist iff it commits, workers are woken at that commit, an
   * idempotency key held by a job committed (or written earlier in that transaction) returns that
   * job, and a failure rolls back only q's savepoint, leaving the caller's transaction usable.
   */
  async enqueue(jobs: readonly NewJob[], tx?: InTransaction): Promise<Job[]> {
    return enqueueOps.enqueue(this.#ctx, jobs, tx);
  }

  /**
   * {@link JobStore.enqueue}, returning with each job whether this call inserted it (`created`)
   * or found it holding the job's idempotency key in its queue and type. Of concurrent enqueues
   * of one key in one queue and type, exactly one reports `created: true`.
   */
  async enqueueResults(jobs: readonly NewJob[], tx?: InTransaction): Promise<EnqueueResult[]> {
    return enqueueOps.enqueueResults(this.#ctx, jobs, tx);
  }

  /** The job with this uuid, or `null`. */
  async get(uuid: string): Promise<Job | null> {
    checkUuid(uuid);
    const row = await this.#op('get', () => getJobByUuid(this.#scope, this.pool, uuid));
    return row ? toJob(row) : null;
  }

  /** The job with this id, or `null`. */
  async getById(id: number): Promise<Job | null> {
    checkJobId(id);
    const row = await this.#op('get', () => getJobById(this.#scope, this.pool, id));
    return row ? toJob(row) : null;
  }

  /**
   * One page of jobs, newest first (`id DESC`), filtered by status/queue/type/team. `limit` is
   * 1–100 (default 25); a bad limit or cursor is `INVALID_ARGUMENT`.
   */
  async list(filter: JobListFilter = {}): Promise<JobPage> {
    const page = checkListFilter(filter);
    // One row more than the page, to know whether another follows.
    const rows = await this.#op('list', () => listJobs(this.#scope, this.pool, { ...page, limit: page.limit + 1 }));
    const jobs = rows.slice(0, page.limit).map(toJob);
    const last = jobs[jobs.length - 1];
    return { jobs, nextCursor: rows.length > page.limit && last ? encodeCursor(last.id) : null };
  }

  /**
   * Leases up to `limit` eligible jobs of `queues` in one statement: `queued`, due, ordered by
   * priority DESC, run_at, id across the queues; skipping rows other claimers hold (SKIP LOCKED)
   * and jobs whose lock key is held. Each lease gets `leaseMs` (database clock) and a fresh
   * fencing token, and uses up one attempt. A lock-key race with another claimer is retried at
   * once, never surfaced. Returned in claim order. The jobs are `leased` (then
   * {@link JobStore.markRunning}), or directly `running` with `start: true` for a claimer that
   * starts them at once — one write instead of two.
   */
  async claim(opts: ClaimOptions): Promise<LeasedJob[]> {
    return claimComplete.claim(this.#ctx, opts);
  }

  /**
   * A worker's steady-state round trip: records `outcomes` exactly as {@link JobStore.complete}
   * does (each fenced by its lease token) and claims up to `claim.limit` jobs exactly as
   * {@link JobStore.claim} does, in one statement and one commit (outcomes beyond one
   * statement's share are written first, on their own; see {@link JobStore.complete}). The claim
   * reads the same snapshot as the outcomes: a lock key an outcome releases is still held for this claim (its
   * next job is claimable by the following one). All or nothing: a lock-key race is retried at
   * once (after the retries, the outcomes are written alone and nothing is claimed); any other
   * error rejects with nothing written. With no outcomes it is a plain claim.
   */
  async completeAndClaim(outcomes: readonly JobOutcome[], opts: ClaimOptions): Promise<CompleteAndClaimResult> {
    return claimComplete.completeAndClaim(this.#ctx, outcomes, opts);
  }

  /** leased → running for the leases still held (fenced by token); returns them with their cancel flag. */
  async markRunning(leases: readonly JobLease[]): Promise<LeaseState[]> {
    const { ids, tokens } = splitLeases(leases);
    if (ids.length === 0) return [];
    const rows = await this.#op('mark_running', () => markJobsRunning(this.#scope, this.pool, ids, tokens));
    return rows.map((r) => ({ id: Number(r.id), cancelRequested: r.cancel_requested }));
  }

  /**
   * Extends the leases still held to `leaseMs` from now (fenced by token). A lease missing from
   * the result was lost (reaped, cancelled out or finished). Carries the cancel flag.
   */
  async heartbeat(leases: readonly JobLease[], leaseMs: number): Promise<LeaseState[]> {
    const { ids, tokens } = splitLeases(leases);
    checkLeaseMs(leaseMs);
    if (ids.length === 0) return [];
    const rows = await this.#op('heartbeat', () => heartbeatJobs(this.#scope, this.pool, ids, tokens, leaseMs));
    return rows.map((r) => ({ id: Number(r.id), cancelRequested: r.cancel_requested }));
  }

  /**
   * Records attempt outcomes, batched (one statement per {@link COMPLETE_CHUNK} outcomes and per
   * {@link STATEMENT_TEXT_BUDGET} characters of results and errors), each fenced by its lease
   * token: `succeeded` (result stored as JSON; undefined, or a value `JSON.stringify` refuses or
   * omits — BigInt, cycle, throwing toJSON, function — → null), `retry_wait` (backoff
   * `retryDelayMs` on the database clock), `dead_letter`, `cancelled`. A cancel requested during
   * the attempt turns any outcome into `cancelled`. Returns, per input, whether that outcome was
   * written under that lease (false = fenced: the lease was lost, even if the job was leased
   * again meanwhile; a lease listed twice is written once, for its first outcome).
   *
   * Rejected with `INVALID_ARGUMENT`, nothing written: a result JSON would store as something
   * else (Map, Set, typed array…) or jsonb cannot hold (\u0000, a lone surrogate), an error with
   * NUL or a lone surrogate, a result or error over 64 MiB, a `retryDelayMs` over 100 years.
   */
  async complete(outcomes: readonly JobOutcome[]): Promise<boolean[]> {
    return claimComplete.complete(this.#ctx, outcomes);
  }

  /** Records a success (see {@link JobStore.complete}); false when fenced. */
  async succeed(lease: JobLease, result?: unknown, steps?: Step[]): Promise<boolean> {
    const [ok] = await this.complete([{ ...lease, status: 'succeeded', result, ...(steps ? { steps } : {}) }]);
    return ok === true;
  }

  /**
   * Records a failed attempt: `retry_wait` after `retryDelayMs`, or `dead_letter` when
   * `retryDelayMs` is null. False when fenced.
   */
  async fail(lease: JobLease, error: string, retryDelayMs: number | null, steps?: Step[]): Promise<boolean> {
    const outcome: JobOutcome =
      retryDelayMs === null
        ? { ...lease, status: 'dead_letter', error, ...(steps ? { steps } : {}) }
        : { ...lease, status: 'retry_wait', error, retryDelayMs, ...(steps ? { steps } : {}) };
    const [ok] = await this.complete([outcome]);
    return ok === true;
  }

  /** Replaces the step timeline of a held lease; false when fenced. */
  async updateSteps(lease: JobLease, steps: readonly Step[]): Promise<boolean> {
    checkLease(lease);
    const json = stepsJson(steps);
    return this.#op('update_steps', () => updateJobSteps(this.#scope, this.pool, lease.id, lease.leaseToken, json));
  }

  /**
   * Stores `progress` on the job of a held lease (fenced by its token): a JSON value of at most
   * `MAX_PROGRESS_BYTES` (8 KiB) of JSON text, or `null` for none. It is kept across
   * attempts and when the job finishes, and read back as `Job.progress`. False when fenced.
   * Rejected with `INVALID_ARGUMENT`, nothing written: a value JSON cannot carry as is (BigInt,
   * a non-finite number, a cycle, a Map…, `undefined`) or a larger one.
   */
  async updateProgress(lease: JobLease, progress: unknown): Promise<boolean> {
    checkLease(lease);
    const json = progressJson('updateProgress', progress);
    return this.#op('update_progress', () => updateJobProgress(this.#scope, this.pool, lease.id, lease.leaseToken, json));
  }

  /**
   * Puts the job of a held lease back to wait for `delayMs` (database clock) without using an
   * attempt: `scheduled` until then (`queued` at once for 0), its lease cleared, the attempt the
   * claim counted given back, `snoozes` one higher. A job already snoozed `maxSnoozes` times
   * (default {@link DEFAULT_MAX_SNOOZES}, 100) is dead-lettered instead, and a requested cancel
   * wins. Fenced by the lease token: a lease no longer held writes nothing (`fenced`). See
   * {@link SnoozeResult}. `delayMs` must be finite, from 0 to 100 years, `maxSnoozes` an integer
   * from 0 to 2³¹−1, else `INVALID_ARGUMENT` before anything is written.
   */
  async snooze(lease: JobLease, delayMs: number, maxSnoozes: number = DEFAULT_MAX_SNOOZES): Promise<SnoozeResult> {
    checkLease(lease);
    const delay = checkSnoozeDelay('snooze', delayMs);
    const max = checkMaxSnoozes('snooze', maxSnoozes);
    const row = await this.#ctx.opPuttingBack(
      'snooze',
      () => snoozeJob(this.#scope, this.pool, lease.id, lease.leaseToken, delay, max, this.channel),
      (r) => r?.status === 'queued',
    );
    if (row === undefined) return { status: 'fenced', runAt: null, snoozes: null };
    if (row.status === 'scheduled' || row.status === 'queued') return { status: 'snoozed', runAt: row.run_at, snoozes: row.snoozes };
    return { status: row.status, runAt: null, snoozes: row.snoozes };
  }

  /**
   * Gives held leases back (a stopping worker): the jobs are `queued` again at once, the attempt
   * given back, their place in line kept; idle workers are woken. Returns the ids released.
   */
  async release(leases: readonly JobLease[]): Promise<number[]> {
    const { ids, tokens } = splitLeases(leases);
    if (ids.length === 0) return [];
    return this.#ctx.opPuttingBack(
      'release',
      () => releaseJobs(this.#scope, this.pool, ids, tokens, this.channel),
      (r) => r.length > 0,
    );
  }

  /**
   * Gives back, as {@link JobStore.release} does (attempt given back, not a crash), every lease
   * `workerId` still holds from the claims named `claimIds` (`ClaimOptions.claimId`): a worker's
   * reconciliation after a claim whose reply was lost — the jobs that claim leased, which the
   * worker never saw, go back to the queue at once instead of waiting for their leases to lapse.
   * Leases of other claims are never touched, even those of another process with the same worker
   * id. Returns the ids released.
   */
  async releaseClaims(workerId: string, claimIds: readonly string[]): Promise<number[]> {
    if (typeof workerId !== 'string' || workerId === '') throw invalidArgument('releaseClaims: workerId must be a non-empty string');
    checkName('releaseClaims', 'workerId', workerId);
    if (!Array.isArray(claimIds)) throw invalidArgument('releaseClaims: claimIds must be an array of uuid strings');
    const ids = claimIds.map((id) => checkClaimId('releaseClaims', id));
    if (ids.length === 0) return [];
    return this.#ctx.opPuttingBack(
      'release_claims',
      () => releaseClaims(this.#scope, this.pool, workerId, ids, this.channel),
      (r) => r.length > 0,
    );
  }

  /** `scheduled`/`retry_wait` → `queued` once due; wakes idle workers. Returns the count. */
  promoteDue(): Promise<number> {
    return maintenance.promoteDue(this.#ctx);
  }

  /**
   * Takes back every lapsed lease: `retry_wait` now with the attempt given back and
   * `resume_count + 1`, or `dead_letter` once the job was already resumed `maxResumes` times, or
   * `cancelled` if a cancel was requested.
   */
  async reapExpired(maxResumes = DEFAULT_MAX_RESUMES): Promise<ReapedJob[]> {
    return maintenance.reapExpired(this.#ctx, maxResumes);
  }

  /**
   * Reaps then promotes in one transaction, under a transaction-level advisory lock: returns
   * `null` (doing nothing) while another process runs maintenance. Workers prefer a
   * session-level lock held by their listener; this is the fallback without one.
   */
  async maintain(maxResumes = DEFAULT_MAX_RESUMES): Promise<MaintenanceResult | null> {
    return maintenance.maintain(this.#ctx, maxResumes);
  }

  /**
   * Cancels a waiting job at once (`cancelled`), or asks the worker running a leased/running job
   * to abort it (it then ends `cancelled`).
   */
  async cancel(uuid: string): Promise<CancelOutcome> {
    checkUuid(uuid);
    const row = await this.#op('cancel', () => cancelJob(this.#scope, this.pool, uuid, this.channel));
    if (!row) return 'not_cancellable';
    return row.status === 'cancelled' ? 'cancelled' : 'cancel_requested';
  }

  /** `dead_letter` → `cancelled`; false when the job is missing or not in the dead letter. */
  async forgetDeadLetter(uuid: string): Promise<boolean> {
    checkUuid(uuid);
    return this.#op('forget', () => forgetDeadLetter(this.#scope, this.pool, uuid));
  }

  /** Deletes `succeeded`/`cancelled` jobs finished more than `olderThanMs` ago; returns the count. */
  async purgeFinished(olderThanMs: number): Promise<number> {
    checkPurgeAge(olderThanMs);
    return this.#op('purge', () => purgeFinished(this.#scope, this.pool, olderThanMs));
  }

  /**
   * Jobs per queue and status, for the statuses a job leaves (scheduled, queued, leased, running,
   * retry_wait) and the dead letter: one grouped count. The `q.jobs.backlog` gauge reads it.
   */
  backlog(): Promise<Array<{ queue: string; status: JobStatus; count: number }>> {
    return this.#op('backlog', () => countBacklog(this.#scope, this.pool));
  }

  /**
   * The groups with jobs leased or running now and how many, most first: what per-group limits
   * hold. `queue`: of that queue only; `limit` 1–1,000 groups, default 100.
   */
  runningGroups(filter: { queue?: string; limit?: number } = {}): Promise<GroupRunning[]> {
    const { queue, limit } = checkRunningGroupsFilter(filter);
    return this.#op('running_groups', () => countRunningGroups(this.#scope, this.pool, queue, limit));
  }

  /**
   * Creates or replaces the schedule `input.name` (see `@q/job-worker`'s `JobQueue.schedule`,
   * which computes `nextFireAt` from the pattern). A replaced schedule with the same pattern and
   * time zone keeps its next fire time and last slot. Bad field → `INVALID_ARGUMENT`, nothing written.
   */
  upsertSchedule(input: ScheduleInput): Promise<StoredSchedule> {
    return schedules.upsertSchedule(this.#ctx, input);
  }

  /** Deletes the schedule `name`; false when there was none. Its jobs already enqueued stay. */
  deleteSchedule(name: string): Promise<boolean> {
    return schedules.deleteSchedule(this.#ctx, name);
  }

  /** Every schedule, by name. */
  listSchedules(): Promise<StoredSchedule[]> {
    return schedules.listSchedules(this.#ctx);
  }

  /**
   * Pauses the schedule `name`: no slot is enqueued until it is resumed (a tick that read it as
   * due before does not fire it). Pausing a paused schedule changes nothing. Null: no such schedule.
   */
  pauseSchedule(name: string): Promise<StoredSchedule | null> {
    return schedules.pauseSchedule(this.#ctx, name);
  }

  /**
   * Resumes the paused schedule `name` at `firstSlot(cron, timezone)`: its pattern's first slot
   * after now (what `JobQueue.resumeSchedule` passes), or now itself for a caller without a cron
   * parser (the next tick then enqueues no slot before it and moves it to the next slot). Either
   * way the slots of the paused time are not enqueued. A schedule that is not paused is returned
   * as it is. Null: no such schedule.
   */
  resumeSchedule(name: string, firstSlot: (cron: string, timezone: string) => Date): Promise<StoredSchedule | null> {
    return schedules.resumeSchedule(this.#ctx, name, firstSlot);
  }

  /**
   * A scheduler tick's read: the schedules due at `now` (null: the database clock), earliest
   * first, at most `limit`, and the earliest next fire time of all. One index read.
   */
  dueSchedules(now: Date | null, limit?: number): Promise<DueSchedules> {
    return schedules.dueSchedules(this.#ctx, now, limit);
  }

  /**
   * Fires due schedules in one statement: each advances (compare-and-set on what
   * {@link JobStore.dueSchedules} read) and enqueues its slots' jobs, or, if another process
   * fired or changed it meanwhile, does nothing. Returns the names advanced and the jobs inserted.
   */
  fireSchedules(firings: readonly ScheduleFire[]): Promise<FireResult> {
    return schedules.fireSchedules(this.#ctx, firings);
  }

  /**
   * Whether {@link JobStore.listen} connects: false with `pooler: 'transaction'` and no
   * `listenDsn` (a transaction pooler cannot carry LISTEN), where workers find work by polling.
   */
  get notifies(): boolean {
    return this.#placement.pooler !== 'transaction' || this.#placement.listenDsn !== undefined;
  }

  /**
   * Takes the leadership `name` (default `jobs_maintenance`) for `owner` for `ttlMs` (database
   * clock) when it is free, expired or already `owner`'s: a row of `q_leader_leases`, not a
   * session lock, so it works through a transaction pooler and survives nothing it should not.
   * A change of owner bumps the fencing epoch. Returns null while another owner holds it.
   */
  acquireLeadership(owner: string, ttlMs: number, name: string = MAINTENANCE_LEADERSHIP): Promise<LeaderLease | null> {
    const ttl = checkLeadership('acquireLeadership', owner, ttlMs, name);
    return this.#op('leader_acquire', () => leadership.acquire(this.#scope, this.pool, name, owner, ttl));
  }

  /** Extends a held lease by `ttlMs` from now; null once it expired or another owner took it (leadership lost). */
  renewLeadership(lease: LeaderLease, ttlMs: number): Promise<LeaderLease | null> {
    checkLeaderLease('renewLeadership', lease);
    const ttl = checkLeadership('renewLeadership', lease.owner, ttlMs, lease.name);
    return this.#op('leader_renew', () => leadership.renew(this.#scope, this.pool, lease, ttl));
  }

  /** Expires a held lease now, so another process can take over at once; false when it was no longer held. */
  releaseLeadership(lease: LeaderLease): Promise<boolean> {
    checkLeaderLease('releaseLeadership', lease);
    return this.#op('leader_release', () => leadership.release(this.#scope, this.pool, lease));
  }

  /**
   * One maintenance round fenced by `lease`: in one transaction, renews the lease (locking its
   * row), then reaps lapsed leases and promotes due jobs. Returns null, doing nothing, when the
   * lease expired or was taken over. A holder that stalls inside the round has its session ended
   * by the server after `max(ttlMs, 1 s)` idle, rolling the round back: a deposed leader's late
   * writes never commit.
   */
  async maintainAsLeader(lease: LeaderLease, ttlMs: number, maxResumes = DEFAULT_MAX_RESUMES): Promise<LeaderMaintenanceResult | null> {
    checkLeaderLease('maintainAsLeader', lease);
    const ttl = checkLeadership('maintainAsLeader', lease.owner, ttlMs, lease.name);
    checkMaxResumes(maxResumes);
    return this.#ctx.opPuttingBack(
      'maintain',
      () => leadership.maintainFenced(this.#scope, this.pool, this.channel, lease, ttl, maxResumes),
      maintenance.roundPutBack,
    );
  }

  /**
   * A dedicated LISTEN connection on {@link JobStore.channel} (not taken from the pool; on
   * `listenDsn` when given). With `pooler: 'transaction'` and no `listenDsn` it never connects
   * (see {@link JobStore.notifies}). Closed by {@link JobStore.close} at the latest.
   */
  listen(handlers: JobListenerHandlers): JobListener {
    return this.#listenOn(this.channel, handlers);
  }

  /**
   * Resolves with the job once it has finished (`succeeded`, `dead_letter` or `cancelled`; at
   * once if it has). Every wait of this store shares one LISTEN connection on
   * {@link JobStore.finishedChannel} and one read of the waited jobs per wake-up; it polls (every
   * second) while that connection is down, and always behind a transaction pooler without
   * `listenDsn`. Rejects with a `QError`: `TIMEOUT` after `timeoutMs`, `NOT_FOUND` when no job has
   * the uuid (or it is purged while waited for; a job enqueued in a transaction that has not
   * committed does not exist yet), `CLOSED` when the store closes; with the signal's reason when
   * `signal` aborts.
   */
  waitFor(uuid: string, opts?: WaitForOptions): Promise<Job> {
    if (this.#closed) return Promise.reject(closedError());
    // Bad input is checked synchronously inside; a caller awaiting or chaining gets it as a rejection like every other call.
    try {
      return this.#waiters.wait(uuid, opts);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  #listenOn(channel: string, handlers: JobListenerHandlers): JobListener {
    if (this.#closed) throw closedError();
    const listener = new JobListener(this.notifies ? this.#dsn : null, channel, this.#applicationName, handlers, this.#scope);
    this.#listeners.add(listener);
    const close = listener.close.bind(listener);
    listener.close = async () => {
      this.#listeners.delete(listener);
      await close();
    };
    return listener;
  }

  /** Runs `fn` as operation `name`: traced, and every failure a {@link QError} (see `databaseError`). */
  #op<T>(name: string, fn: () => Promise<T>, attributes?: Record<string, string | number | boolean>): Promise<T> {
    return runOperation(this.#operations, name, fn, attributes);
  }
}
