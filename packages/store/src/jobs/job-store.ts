import { createHash } from 'node:crypto';
import type { Tracer } from '@opentelemetry/api';
import type { MeterProvider } from '@opentelemetry/api';
import { instrumentPool, observeGauge, qTracer, withOperation } from '@q/otel';
import {
  QError,
  QErrorCode,
  StatementScope,
  checkName,
  checkPlacement,
  databaseError,
  invalidArgument,
  namedStatements,
  openPool,
  withTransaction,
  type ConnectionPlacement,
  at,
} from '@q/schema';
import type pg from 'pg';
import type { JobStoreFromPoolOptions, JobStoreOpenOptions, JobStoreSchemaOptions } from './options.js';
import { countBacklog } from './sql/count-backlog.js';
import { checkInTransaction, inCallerTransaction, type InTransaction } from '../transaction.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import * as leadership from './leadership.js';
import { MAINTENANCE_LEADERSHIP, checkLeaderLease, checkLeadership, type LeaderLease, type LeaderMaintenanceResult } from './leadership.js';
import { JobListener, type JobListenerHandlers } from './listener.js';
import { toJob, toLeasedJob, type JobRow } from './row.js';
import { cancelJob } from './sql/cancel-job.js';
import { claimJobs } from './sql/claim-jobs.js';
import { completeAndClaimJobs } from './sql/complete-and-claim-jobs.js';
import { completeJobs } from './sql/complete-jobs.js';
import { dbNow } from './sql/db-now.js';
import { drawJobIds } from './sql/draw-job-ids.js';
import { enqueueJobs, type EnqueueRow } from './sql/enqueue-jobs.js';
import type { Queryable } from './sql/db.js';
import { checkJobPool, listenerConnection, poolError, transactionWriteError } from './from-pool.js';
import { forgetDeadLetter } from './sql/forget-dead-letter.js';
import { getJobById, getJobByUuid } from './sql/get-job.js';
import { getJobsByIdempotencyKey } from './sql/get-jobs-by-idempotency-key.js';
import { heartbeatJobs } from './sql/heartbeat-jobs.js';
import { listJobs } from './sql/list-jobs.js';
import { tryMaintenanceXactLock } from './sql/maintenance-lock.js';
import { markJobsRunning } from './sql/mark-jobs-running.js';
import { promoteDueJobs } from './sql/promote-due-jobs.js';
import { purgeFinished } from './sql/purge-finished.js';
import { reapExpiredLeases } from './sql/reap-expired-leases.js';
import { releaseJobs } from './sql/release-jobs.js';
import { updateJobSteps } from './sql/update-job-steps.js';
import type {
  ClaimOptions,
  CancelOutcome,
  Job,
  JobLease,
  JobStatus,
  JobListFilter,
  JobOutcome,
  JobPage,
  LeaseState,
  LeasedJob,
  NewJob,
  ReapedJob,
  Step,
} from './types.js';
import {
  MAX_DELAY_MS,
  checkCallSize,
  checkClaim,
  checkLease,
  checkLeaseMs,
  checkMaxResumes,
  checkStatus,
  checkUuid,
  splitLeases,
  stepsJson,
  toEnqueueBatch,
} from './validate.js';
import { claimOrder } from './claim-order.js';
import { STATEMENT_TEXT_BUDGET, chunkIndices, keyOrder, leaseKey, prepareOutcomes, retryDeadlock, sliceBatch } from './batches.js';
import { bindSchema, checkSchemaOptions } from './bind.js';

/** Crashes a job survives before the reaper dead-letters it (the 4th crash). */
export const DEFAULT_MAX_RESUMES = 3;
/** Jobs per enqueue statement; larger batches are split, in one transaction. */
export const ENQUEUE_CHUNK = 2_000;
export { COMPLETE_CHUNK, STATEMENT_TEXT_BUDGET } from './batches.js';
export { CALL_TEXT_LIMIT } from './validate.js';

const DEFAULT_LIST_LIMIT = 25;
// A lock-key race (two claimers saw one key free) is retried at once, a bounded number of times.
const CLAIM_RACE_RETRIES = 8;
// Attempts of a call that lost a deadlock (the database rolled it back: safe to run again).
const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';
const LOCK_KEY_INDEX = 'q_jobs_lock_key_active_key';

/** Result of {@link JobStore.completeAndClaim}. */
export interface CompleteAndClaimResult {
  /** Per outcome, in input order: whether it was written (false = fenced). */
  written: boolean[];
  /** The jobs leased, in claim order. */
  jobs: LeasedJob[];
}

/** Result of {@link JobStore.maintain}. */
export interface MaintenanceResult {
  reaped: ReapedJob[];
  promoted: number;
}

/**
 * The job table's narrow driver: every operation is one parameterised statement (batched with
 * `unnest` where it takes many jobs), and every write of a lease holder is fenced by the lease's
 * token. `JobQueue` and `Worker` (`@q/job-worker`) are built on it.
 */
export class JobStore {
  /** The pool the store queries through (closed by {@link JobStore.close} unless it came from {@link JobStore.fromPool}). */
  readonly pool: pg.Pool;
  /** The LISTEN/NOTIFY channel of this job table (one per schema). */
  readonly channel: string;
  /** The schema holding the job table (`schema` option, else `current_schema()` at open). */
  readonly schema: string;
  readonly #dsn: string | pg.ClientConfig;
  readonly #tracer: Tracer | undefined;
  readonly #applicationName: string;
  readonly #scope: StatementScope;
  readonly #listeners = new Set<JobListener>();
  readonly #placement: ConnectionPlacement;
  #unobserve: (() => void) | undefined;
  #closed = false;
  #ownsPool = true;

  private constructor(
    pool: pg.Pool,
    dsn: string | pg.ClientConfig,
    schema: string,
    tracer: Tracer | undefined,
    applicationName: string,
    opts: JobStoreSchemaOptions & ConnectionPlacement & { meterProvider?: MeterProvider | undefined },
  ) {
    this.pool = pool;
    this.#placement = { pooler: opts.pooler, listenDsn: opts.listenDsn };
    // Behind a transaction pooler the LISTEN connection must bypass it (listenDsn) or not exist.
    this.#dsn = opts.listenDsn ?? dsn;
    this.schema = schema;
    this.#scope = new StatementScope(schema, { named: namedStatements(opts) });
    this.channel = `q_jobs_${createHash('sha256').update(schema).digest('hex').slice(0, 24)}`;
    this.#tracer = tracer;
    this.#applicationName = applicationName;
    this.#unobserve = observeGauge(
      opts.meterProvider,
      JOBS_BACKLOG_METRIC,
      { unit: '{job}', description: 'Jobs per queue and status (scheduled, queued, leased, running, retry_wait, dead_letter)' },
      async () => {
        if (this.#closed) return [];
        try {
          return (await countBacklog(this.#scope, this.pool)).map((r) => ({ value: r.count, attributes: { queue: r.queue, status: r.status } }));
        } catch {
          // A collection must not fail the exporter: this one reports nothing.
          return [];
        }
      },
    );
  }

  /**
   * Opens a pool on `dsn` (validated; its password never appears in an error) and migrates the
   * `jobs` module into `opts.schema` (created if missing) or, without it, the connection's current
   * schema, unless `opts.migrate` is false.
   */
  static async open(dsn: string, opts: JobStoreOpenOptions = {}): Promise<JobStore> {
    checkPlacement('JobStore.open', opts);
    const asked = checkSchemaOptions('JobStore.open', opts);
    const applicationName = opts.applicationName ?? 'q-jobs';
    const pool = await openPool(dsn, {
      maxConns: opts.maxConns,
      ...(opts.idleTimeoutMillis !== undefined ? { idleTimeoutMillis: opts.idleTimeoutMillis } : {}),
      applicationName,
      instrument: (p) => instrumentPool(p, opts.tracerProvider),
    });
    try {
      const schema = await bindSchema(pool, asked, opts.migrate !== false);
      return new JobStore(pool, dsn, schema, qTracer(opts.tracerProvider), applicationName, { ...opts, schema });
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw databaseError('open', err);
    }
  }

  /**
   * A store on a pool the application owns (and ends): {@link JobStore.close} closes the store's
   * listeners but not the pool. Migrates the `jobs` module into `opts.schema` or the pool's current
   * schema unless `opts.migrate` is false, as {@link JobStore.open} does. Listeners open their own
   * connection with the pool's connection settings. Statement spans need `instrumentPool`
   * (`@q/otel`) on it.
   */
  static async fromPool(pool: pg.Pool, opts: JobStoreFromPoolOptions = {}): Promise<JobStore> {
    checkJobPool(pool, opts);
    checkPlacement('JobStore.fromPool', opts);
    const asked = checkSchemaOptions('JobStore.fromPool', opts);
    let schema: string;
    try {
      schema = await bindSchema(pool, asked, opts.migrate !== false);
    } catch (err) {
      throw err instanceof QError && err.code === QErrorCode.CONFIG ? err : poolError(err);
    }
    const applicationName = opts.applicationName ?? 'q-jobs';
    const store = new JobStore(pool, listenerConnection(pool), schema, qTracer(opts.tracerProvider), applicationName, { ...opts, schema });
    store.#ownsPool = false;
    return store;
  }

  /** Closes every listener and the pool (unless the store came from {@link JobStore.fromPool}). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#unobserve?.();
    this.#unobserve = undefined;
    await Promise.all([...this.#listeners].map((l) => l.close()));
    if (this.#ownsPool) await this.pool.end();
  }

  /** The database clock (every process times leases alike). */
  now(): Promise<Date> {
    return this.#op('now', () => dbNow(this.#scope, this.pool));
  }

  /**
   * Inserts jobs; all or none. An idempotency-key conflict inserts nothing for that job and
   * returns the stored original, unchanged. A `runAt` after the database's now makes the job
   * `scheduled`; otherwise it is `queued` at the database's now. Queued jobs wake idle workers
   * (NOTIFY, delivered at commit). One statement per {@link ENQUEUE_CHUNK} jobs and per
   * {@link STATEMENT_TEXT_BUDGET} characters of payload; several statements share one
   * transaction. Jobs are inserted in idempotency-key order (ids still follow the input order), so
   * concurrent batches sharing keys in any order never deadlock; a deadlock with anything else is
   * retried. Returns the jobs in input order.
   *
   * Rejected with `INVALID_ARGUMENT` before any statement: a queue, type or key that is empty
   * (the type may be empty), over 2,048 UTF-8 bytes, or holds NUL or a lone surrogate; a payload
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
    if (!Array.isArray(jobs)) throw invalidArgument('jobs must be an array');
    const client = tx === undefined ? undefined : checkInTransaction('enqueue', tx);
    const batch = toEnqueueBatch(jobs);
    if (jobs.length === 0) return [];
    const sizes = batch.payloads.map((p) => p.length);
    const total = checkCallSize('enqueue', 'payload JSON', sizes);
    const fitsOne = jobs.length <= ENQUEUE_CHUNK && total <= STATEMENT_TEXT_BUDGET;
    // One statement orders its rows itself; several are given them in key order.
    const chunks = fitsOne ? [] : chunkIndices(keyOrder(batch.idempotencyKeys), sizes, ENQUEUE_CHUNK);
    if (client) return this.#enqueueThrough(client, batch, fitsOne ? null : chunks);
    return this.#op(
      'enqueue',
      () =>
        retryDeadlock(async () => {
          if (fitsOne) return this.#enqueueChunk(this.pool, batch, null);
          return this.#transaction(async (client) => {
            // Ids in input order (see enqueue-jobs.ts), the rows inserted in key order across statements.
            const ids = await drawJobIds(this.#scope, client, jobs.length);
            const out = new Array<Job>(jobs.length);
            for (const chunk of chunks) {
              const got = await this.#enqueueChunk(client, { ...batch, ids }, chunk);
              chunk.forEach((pos, k) => (out[pos] = at(got, k)));
            }
            return out;
          });
        }),
      { 'job.count': jobs.length },
    );
  }

  /**
   * Writes through the caller's connection, inside its transaction and behind a savepoint: the
   * same statements as {@link JobStore.enqueue}, in the same key order (`chunks` null = one
   * statement). No deadlock retry here: a deadlock belongs to the caller's transaction.
   */
  #enqueueThrough(client: Queryable, batch: ReturnType<typeof toEnqueueBatch>, chunks: number[][] | null): Promise<Job[]> {
    const n = batch.uuids.length;
    return this.#op(
      'enqueue',
      async () => {
        try {
          return await inCallerTransaction('enqueue', client, async () => {
            // Every statement names the store's schema: the client's search_path does not matter.
            if (chunks === null) return this.#enqueueChunk(client, batch, null);
            const ids = await drawJobIds(this.#scope, client, n);
            const out = new Array<Job>(n);
            for (const chunk of chunks) {
              const got = await this.#enqueueChunk(client, { ...batch, ids }, chunk);
              chunk.forEach((pos, k) => (out[pos] = at(got, k)));
            }
            return out;
          });
        } catch (err) {
          throw transactionWriteError(err);
        }
      },
      { 'job.count': n, 'job.in_transaction': true },
    );
  }

  /** Inserts the jobs at `indices` of `b` (all, ids drawn by the statement, when null); returns them in that order. */
  async #enqueueChunk(db: Queryable, b: ReturnType<typeof toEnqueueBatch>, indices: number[] | null): Promise<Job[]> {
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
      ids: indices === null ? b.uuids.map(() => null) : pick(b.ids),
    };
    let rows: EnqueueRow[];
    try {
      rows = await enqueueJobs(this.#scope, db, chunk, this.channel);
    } catch (err) {
      throw mapWriteError(err);
    }
    const byUuid = new Map<string, JobRow>();
    const byKey = new Map<string, JobRow>();
    for (const r of rows) {
      if (r.inserted) byUuid.set(r.uuid, r);
      // At most one row per key: an original committed before the statement, or the row this
      // batch inserted first (a later duplicate in the batch resolves to it).
      if (r.idempotency_key !== null) byKey.set(r.idempotency_key, r);
    }
    const missing = chunk.uuids.flatMap((u, i) => {
      const key = chunk.idempotencyKeys[i];
      return !byUuid.has(u) && key !== null && key !== undefined && !byKey.has(key) ? [key] : [];
    });
    if (missing.length > 0) {
      // A concurrent producer committed the key while this statement ran: read its row now.
      for (const r of await getJobsByIdempotencyKey(this.#scope, db, missing)) if (r.idempotency_key) byKey.set(r.idempotency_key, r);
    }
    return chunk.uuids.map((u, i) => {
      const row = byUuid.get(u) ?? byKey.get(chunk.idempotencyKeys[i] ?? '');
      if (!row) throw new QError(QErrorCode.NOT_FOUND, 'the job holding this idempotency key was deleted meanwhile');
      return toJob(row);
    });
  }

  /** The job with this uuid, or `null`. */
  async get(uuid: string): Promise<Job | null> {
    checkUuid(uuid);
    const row = await this.#op('get', () => getJobByUuid(this.#scope, this.pool, uuid));
    return row ? toJob(row) : null;
  }

  /** The job with this id, or `null`. */
  async getById(id: number): Promise<Job | null> {
    if (!Number.isSafeInteger(id)) throw invalidArgument('id must be a safe integer');
    const row = await this.#op('get', () => getJobById(this.#scope, this.pool, id));
    return row ? toJob(row) : null;
  }

  /**
   * One page of jobs, newest first (`id DESC`), filtered by status/queue/type/team. `limit` is
   * 1–100 (default 25); a bad limit or cursor is `INVALID_ARGUMENT`.
   */
  async list(filter: JobListFilter = {}): Promise<JobPage> {
    const limit = filter.limit ?? DEFAULT_LIST_LIMIT;
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw invalidArgument('limit must be between 1 and 100');
    const status = filter.status === undefined ? null : checkStatus(filter.status);
    for (const k of ['queue', 'type'] as const) {
      if (filter[k] !== undefined) checkName('list', k, filter[k], { allowEmpty: true });
    }
    if (filter.teamId !== undefined && !Number.isSafeInteger(filter.teamId)) throw invalidArgument('teamId must be a safe integer');
    const beforeId = filter.cursor === undefined || filter.cursor === null ? null : decodeCursor(filter.cursor);
    const rows = await this.#op('list', () =>
      listJobs(this.#scope, this.pool, {
        status,
        queue: filter.queue ?? null,
        type: filter.type ?? null,
        teamId: filter.teamId ?? null,
        beforeId,
        limit: limit + 1,
      }),
    );
    const jobs = rows.slice(0, limit).map(toJob);
    const last = jobs[jobs.length - 1];
    return { jobs, nextCursor: rows.length > limit && last ? encodeCursor(last.id) : null };
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
    const claim = checkClaim(opts);
    return this.#op('claim', async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          const rows = await claimJobs(this.#scope, this.pool, claim.queues, claim.limit, claim.workerId, claim.leaseMs, claim.status);
          return rows.map(toLeasedJob).sort(claimOrder);
        } catch (err) {
          if (!isLockKeyRace(err) || attempt >= CLAIM_RACE_RETRIES) {
            if (isLockKeyRace(err)) return [];
            throw err;
          }
        }
      }
    });
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
    if (!Array.isArray(outcomes)) throw invalidArgument('outcomes must be an array');
    const prepared = prepareOutcomes(outcomes);
    const claim = checkClaim(opts);
    if (outcomes.length === 0) return { written: [], jobs: await this.claim(opts) };
    return this.#op(
      'complete_claim',
      async () => {
        const written = new Set<string>();
        const { batch, chunks } = prepared;
        // Rare (a worker submits fewer): the older outcomes alone first, the last chunk with the claim.
        for (const [from, to] of chunks.slice(0, -1)) {
          for (const r of await completeJobs(this.#scope, this.pool, sliceBatch(batch, from, to))) written.add(leaseKey(r.id, r.token));
        }
        const [from, to] = at(chunks, chunks.length - 1);
        const last = sliceBatch(batch, from, to);
        for (let attempt = 0; ; attempt++) {
          try {
            const r = await completeAndClaimJobs(this.#scope, this.pool, last, claim);
            for (const c of r.completed) written.add(leaseKey(c.id, c.token));
            return { written: prepared.report(written), jobs: r.claimed.map(toLeasedJob).sort(claimOrder) };
          } catch (err) {
            if (!isLockKeyRace(err)) throw err;
            if (attempt >= CLAIM_RACE_RETRIES) {
              for (const r of await completeJobs(this.#scope, this.pool, last)) written.add(leaseKey(r.id, r.token));
              return { written: prepared.report(written), jobs: [] };
            }
          }
        }
      },
      { 'job.count': outcomes.length },
    );
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
    if (!Array.isArray(outcomes)) throw invalidArgument('outcomes must be an array');
    const prepared = prepareOutcomes(outcomes);
    if (outcomes.length === 0) return [];
    return this.#op(
      'complete',
      async () => {
        const written = new Set<string>();
        for (const [from, to] of prepared.chunks) {
          for (const r of await completeJobs(this.#scope, this.pool, sliceBatch(prepared.batch, from, to))) written.add(leaseKey(r.id, r.token));
        }
        return prepared.report(written);
      },
      { 'job.count': outcomes.length },
    );
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
   * Gives held leases back (a stopping worker): the jobs are `queued` again at once, the attempt
   * given back, their place in line kept; idle workers are woken. Returns the ids released.
   */
  async release(leases: readonly JobLease[]): Promise<number[]> {
    const { ids, tokens } = splitLeases(leases);
    if (ids.length === 0) return [];
    return this.#op('release', () => releaseJobs(this.#scope, this.pool, ids, tokens, this.channel));
  }

  /** `scheduled`/`retry_wait` → `queued` once due; wakes idle workers. Returns the count. */
  promoteDue(): Promise<number> {
    return this.#op('promote', () => promoteDueJobs(this.#scope, this.pool, this.channel));
  }

  /**
   * Takes back every lapsed lease: `retry_wait` now with the attempt given back and
   * `resume_count + 1`, or `dead_letter` once the job was already resumed `maxResumes` times, or
   * `cancelled` if a cancel was requested.
   */
  async reapExpired(maxResumes = DEFAULT_MAX_RESUMES): Promise<ReapedJob[]> {
    checkMaxResumes(maxResumes);
    const rows = await this.#op('reap', () => reapExpiredLeases(this.#scope, this.pool, maxResumes));
    return rows.map((r) => ({ id: Number(r.id), uuid: r.uuid, status: r.status }));
  }

  /**
   * Reaps then promotes in one transaction, under a transaction-level advisory lock: returns
   * `null` (doing nothing) while another process runs maintenance. Workers prefer a
   * session-level lock held by their listener; this is the fallback without one.
   */
  async maintain(maxResumes = DEFAULT_MAX_RESUMES): Promise<MaintenanceResult | null> {
    checkMaxResumes(maxResumes);
    return this.#op('maintain', () =>
      this.#transaction(async (client) => {
        if (!(await tryMaintenanceXactLock(this.#scope, client))) return null;
        const reaped = await reapExpiredLeases(this.#scope, client, maxResumes);
        const promoted = await promoteDueJobs(this.#scope, client, this.channel);
        return { reaped: reaped.map((r) => ({ id: Number(r.id), uuid: r.uuid, status: r.status })), promoted };
      }),
    );
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
    if (typeof olderThanMs !== 'number' || !Number.isFinite(olderThanMs) || olderThanMs < 0 || olderThanMs > MAX_DELAY_MS) {
      throw invalidArgument('olderThanMs must be a non-negative number of milliseconds, at most 100 years');
    }
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
  maintainAsLeader(lease: LeaderLease, ttlMs: number, maxResumes = DEFAULT_MAX_RESUMES): Promise<LeaderMaintenanceResult | null> {
    checkLeaderLease('maintainAsLeader', lease);
    const ttl = checkLeadership('maintainAsLeader', lease.owner, ttlMs, lease.name);
    checkMaxResumes(maxResumes);
    return this.#op('maintain', () => leadership.maintainFenced(this.#scope, this.pool, this.channel, lease, ttl, maxResumes));
  }

  /**
   * A dedicated LISTEN connection on {@link JobStore.channel} (not taken from the pool; on
   * `listenDsn` when given). With `pooler: 'transaction'` and no `listenDsn` it never connects
   * (see {@link JobStore.notifies}). Closed by {@link JobStore.close} at the latest.
   */
  listen(handlers: JobListenerHandlers): JobListener {
    if (this.#closed) throw closedError();
    const listener = new JobListener(this.notifies ? this.#dsn : null, this.channel, this.#applicationName, handlers, this.#scope);
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
    if (this.#closed) return Promise.reject(closedError());
    return withOperation(
      this.#tracer,
      `q.jobs.${name}`,
      async () => {
        try {
          return await fn();
        } catch (err) {
          throw this.#closed ? closedError() : databaseError(name, err);
        }
      },
      attributes,
    );
  }

  #transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return withTransaction(this.pool, fn);
  }
}

/** Name of the jobs backlog gauge (`{job}` count per `queue` and `status`). */
export const JOBS_BACKLOG_METRIC = 'q.jobs.backlog';

function closedError(): QError {
  return new QError(QErrorCode.CLOSED, 'the job store is closed');
}

function isLockKeyRace(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === UNIQUE_VIOLATION && e.constraint === LOCK_KEY_INDEX;
}

function mapWriteError(err: unknown): unknown {
  const e = err as { code?: string; constraint?: string };
  if (e?.code === FOREIGN_KEY_VIOLATION) {
    return invalidArgument('retryOfId refers to a job that does not exist');
  }
  return err;
}
