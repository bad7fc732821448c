import { qTracer, requestMetrics, type RequestMetrics } from '@q/otel';
import { migrate } from '@q/schema';
import type { StatementScope } from '@q/schema/internal';
import type pg from 'pg';
import type { FromPoolOptions, OpenOptions } from '../options.js';
import { checkInTransaction, inCallerTransaction, type InTransaction } from '../transaction.js';
import { ackedPositions, planAck } from './ack-plan.js';
import { writeChunks } from './chunks.js';
import { enqueueChunks } from './enqueue-plan.js';
import { BatchStore } from './batch-store.js';
import { closedError, DUPLICATE_REQUEST } from './errors.js';
import { runOperation, type OperationOwner } from '../operation.js';
import { keyId } from './keys.js';
import type { Attrs, StoreContext } from './context.js';
import { checkStoreOptions, scopeOf } from './open.js';
import { checkPool, openStorePool } from '../store-pool.js';
import { ackRequests } from './sql/ack.js';
import { databaseNow, truncateAll } from './sql/admin.js';
import { anyPending, pendingBacklog, type Backlog } from './sql/backlog.js';
import { cancelRequests, selectCancelledKeys } from './sql/cancel.js';
import type { Db } from './sql/db.js';
import { dispatchRequests } from './sql/dispatch.js';
import { insertRequests } from './sql/enqueue.js';
import { inFlightStamps } from './sql/in-flight.js';
import * as leases from './partition-leases.js';
import * as putBack from './put-back.js';
import { ensurePartitionRows, leaveQueue } from './sql/partitions.js';
import { selectPartitionOwners, type OwnerPartitions } from './sql/partition-owners.js';
import { resetStaleRequests } from './sql/reset-stale.js';
import { countResults, expireAnyResults, peekRouteResults, popRouteResults } from './sql/results.js';
import { PARTITIONS, type Completion, type Key, type Lease, type NewRequest, type Request, type Result, type Stamp } from './types.js';
import * as v from './validate.js';

/**
 * The partitioned request queue on Postgres.
 *
 * Requests hash into {@link PARTITIONS} partitions per queue; dispatchers lease partitions with
 * epochs. A request is pending while its dispatch epoch is 0; `dispatch` stamps the partition's
 * epoch and a fresh attempt, and every later write of that dispatch (`ack`, `retry`,
 * `undispatch`, `defer`) is fenced: it only takes effect for the exact attempt, in a partition
 * the writer still holds (`ack`: at the row's epoch). Fenced writes report `false` or are
 * skipped, never an error.
 *
 * Times: `deadline`, `notBefore`, `expiresAt` and the `now: number` arguments are Unix
 * seconds; lease and membership times derive from the `now: Date` arguments (use
 * {@link RequestStore.now}, the database clock); durations are milliseconds.
 */
export class RequestStore {
  /** The connection pool (capped at `maxConns`, default 10; idle connections close after 30 s). */
  readonly pool: pg.Pool;
  /** The schema holding this store's tables (the `schema` option, or the connection's current schema at open). */
  readonly schema: string;
  readonly #scope: StatementScope;
  readonly #migrateInto: string | undefined;
  /** How this store runs its operations (span prefix `q.store`, its `CLOSED` and `DUPLICATE` errors). */
  readonly #operations: OperationOwner;
  readonly #metrics: RequestMetrics;
  readonly #ownsPool: boolean;
  readonly #ctx: StoreContext;
  /** The Batch API's files and batches, in this store's schema (see {@link BatchStore}). */
  readonly batches: BatchStore;
  #closed = false;

  private constructor(pool: pg.Pool, scope: StatementScope, opts: OpenOptions, ownsPool: boolean) {
    this.pool = pool;
    this.schema = scope.schema;
    this.#scope = scope;
    this.#migrateInto = opts.schema;
    this.#ownsPool = ownsPool;
    this.#operations = {
      tracer: qTracer(opts.tracerProvider),
      spanPrefix: 'q.store',
      closed: () => this.#closed,
      closedError,
      errors: DUPLICATE_REQUEST,
    };
    this.#metrics = requestMetrics(opts.meterProvider);
    this.#ctx = { pool, scope, metrics: this.#metrics, op: (name, attrs, fn) => this.#op(name, attrs, fn) };
    this.batches = new BatchStore(this.#ctx, (reqs, tx) => this.enqueue(reqs, tx));
  }

  /**
   * Validates `dsn` (errors never show its password), opens a pool of `maxConns` connections
   * (default 10, idle ones closed after 30 s), pings the database and, unless `migrate: false`,
   * applies the `requests` migrations in the store's schema: `schema` (created if missing), or
   * the connection's current schema.
   */
  static async open(dsn: string, opts: OpenOptions = {}): Promise<RequestStore> {
    checkStoreOptions('RequestStore.open', opts);
    return openStorePool(dsn, opts, { applicationName: opts.applicationName ?? 'q-store' }, async (pool) => {
      const store = new RequestStore(pool, await scopeOf('RequestStore.open', pool, opts), opts, true);
      if (opts.migrate !== false) await store.migrate();
      return store;
    });
  }

  /**
   * A store on a pool the application owns (and ends): {@link RequestStore.close} does not end it.
   * Applies pending `requests` migrations through it unless `migrate: false`, as {@link RequestStore.open}
   * does. Stores of different `schema`s may share one pool. Statement spans need `instrumentPool`
   * (`@q/otel`) on the pool.
   */
  static async fromPool(pool: pg.Pool, opts: FromPoolOptions = {}): Promise<RequestStore> {
    checkPool('RequestStore.fromPool', pool);
    checkStoreOptions('RequestStore.fromPool', opts);
    const scope = await scopeOf('RequestStore.fromPool', pool, opts);
    const store = new RequestStore(pool, scope, opts, false);
    if (opts.migrate !== false) await store.migrate();
    return store;
  }

  /** Applies pending migrations of the `requests` module (safe to run concurrently). */
  async migrate(): Promise<void> {
    await this.#op('migrate', undefined, () =>
      migrate(this.pool, { modules: ['requests'], ...(this.#migrateInto !== undefined ? { schema: this.#migrateInto } : {}) }),
    );
  }

  /** The database clock: pass it as `now` to lease calls so every process times leases alike. */
  async now(): Promise<Date> {
    return this.#op('now', undefined, () => databaseNow(this.#scope, this.pool));
  }

  /** Round trip to the database. */
  async ping(): Promise<void> {
    await this.#op('ping', undefined, () => this.pool.query('SELECT 1'));
  }

  /**
   * Closes the pool (not one passed to {@link RequestStore.fromPool}). Later calls fail with `CLOSED`;
   * closing twice is a no-op.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsPool) await this.pool.end();
  }

  /**
   * Inserts all requests or none (chunks of 1,000 rows in one transaction). Equal deadlines
   * dispatch in submission order, within a call and across calls. A duplicate `(id, token)` —
   * in the call or already stored — fails the whole call with `DUPLICATE`.
   *
   * With `{ client }`, the rows are written through the caller's connection, in its transaction
   * (whatever its search_path: statements name the store's schema): they exist iff it commits. A failure
   * (`DUPLICATE` included) rolls back only q's savepoint, so the caller's transaction stays usable.
   */
  async enqueue(reqs: NewRequest[], tx?: InTransaction): Promise<void> {
    const op = 'enqueue';
    const client = tx === undefined ? undefined : checkInTransaction(op, tx);
    const list = v.list<unknown>(op, 'requests', reqs).map((r, i) => v.newRequest(op, r, i));
    if (list.length === 0) return;
    const chunks = enqueueChunks(op, list);
    await this.#op(op, { 'q.batch': list.length }, async () => {
      if (client) {
        await inCallerTransaction(op, client, async () => {
          // The statements only call query(config), which is all a TransactionClient promises.
          for (const chunk of chunks) await insertRequests(this.#scope, client as Db, chunk);
        });
      } else await writeChunks(this.pool, chunks, (db, chunk) => insertRequests(this.#scope, db, chunk));
    });
    const perQueue = new Map<string, number>();
    for (const r of list) perQueue.set(r.queue, (perQueue.get(r.queue) ?? 0) + 1);
    for (const [queue, n] of perQueue) this.#metrics.enqueued.add(n, { queue });
  }

  /** Creates the queue's 64 partition rows if missing (idempotent). */
  async ensurePartitions(queue: string): Promise<void> {
    v.text('ensurePartitions', 'queue', queue);
    await this.#op('ensurePartitions', { 'q.queue': queue }, () => ensurePartitionRows(this.#scope, this.pool, queue, PARTITIONS));
  }

  /**
   * Takes up to `limit` unowned or lapsed partitions of `queue` for `owner`, bumping each one's
   * epoch (which fences the previous owner), leased until `now + ttlMs`. A live lease is never
   * taken, not even by its own owner.
   */
  async acquirePartitions(queue: string, owner: string, now: Date, ttlMs: number, limit: number): Promise<Lease[]> {
    return leases.acquirePartitions(this.#ctx, queue, owner, now, ttlMs, limit);
  }

  /**
   * Renews all of `owner`'s leases on `queue` until `now + ttlMs` and reports the live
   * dispatchers. A member renews its membership; a non-member withdraws it (it keeps renewing
   * its leases but no longer counts, so peers take over its share). Lapsed members disappear.
   */
  async heartbeat(queue: string, owner: string, now: Date, ttlMs: number, member: boolean): Promise<{ leases: Lease[]; members: number }> {
    return leases.heartbeat(this.#ctx, queue, owner, now, ttlMs, member);
  }

  /** Releases the listed partitions `owner` holds, at once (others' partitions are untouched). */
  async releasePartitions(queue: string, owner: string, partitions: number[]): Promise<void> {
    await leases.releasePartitions(this.#ctx, queue, owner, partitions);
  }

  /** Releases every partition `owner` holds on `queue` and drops its membership, atomically. */
  async leave(queue: string, owner: string): Promise<void> {
    v.queueOwner('leave', queue, owner);
    await this.#op('leave', { 'q.queue': queue }, () => leaveQueue(this.#scope, this.pool, queue, owner));
  }

  /**
   * Drains (or undrains) the listed partitions `owner` holds: a draining partition stays leased
   * — acks, retries and undispatches work — but dispatches nothing new.
   */
  async setDraining(queue: string, owner: string, partitions: number[], draining: boolean): Promise<void> {
    await leases.setDraining(this.#ctx, queue, owner, partitions, draining);
  }

  /**
   * Stamps up to `limit` pending requests with `not_before <= now` in partitions `owner` holds
   * and is not draining: earliest deadline first, then submission order. Each gets the
   * partition's epoch and a fresh attempt. Cancelled requests come back with `cancelled: true`.
   * Rows another dispatcher is stamping are skipped, never waited for.
   */
  async dispatch(queue: string, owner: string, now: Date, limit: number): Promise<Request[]> {
    const op = 'dispatch';
    v.queueOwner(op, queue, owner);
    const nowSeconds = Math.floor(v.instant(op, 'now', now) / 1000);
    const n = v.limit(op, limit);
    if (n === 0) return [];
    const rows = await this.#op(op, { 'q.queue': queue, 'q.limit': n }, () =>
      dispatchRequests(this.#scope, this.pool, owner, queue, nowSeconds, n),
    );
    if (rows.length > 0) this.#metrics.dispatched.add(rows.length, { queue });
    return rows;
  }

  /**
   * Like {@link RequestStore.dispatch}, but stamps only requests that need no endpoint call to be
   * answered: deadline at or before `now`, or cancelled. A dispatcher whose admission gate is
   * closed still answers these. Unlike `dispatch` it reads every due pending request of the
   * owner's partitions (cancellation has no index), so call it sparingly (e.g. once a second).
   */
  async dispatchAnswerable(queue: string, owner: string, now: Date, limit: number): Promise<Request[]> {
    const op = 'dispatchAnswerable';
    v.queueOwner(op, queue, owner);
    const nowSeconds = Math.floor(v.instant(op, 'now', now) / 1000);
    const n = v.limit(op, limit);
    if (n === 0) return [];
    const rows = await this.#op(op, { 'q.queue': queue, 'q.limit': n }, () =>
      dispatchRequests(this.#scope, this.pool, owner, queue, nowSeconds, n, true),
    );
    if (rows.length > 0) this.#metrics.dispatched.add(rows.length, { queue });
    return rows;
  }

  /** Stamps of `owner`'s requests in flight on `queue` under the current epochs of its partitions. */
  async inFlight(queue: string, owner: string): Promise<Stamp[]> {
    v.queueOwner('inFlight', queue, owner);
    return this.#op('inFlight', { 'q.queue': queue }, () => inFlightStamps(this.#scope, this.pool, owner, queue));
  }

  /**
   * Returns to pending the requests stamped by an older epoch of `owner`'s partitions:
   * `partitions` undefined = all it holds, `[]` = none. Rows another transaction holds are
   * skipped (left for a later call); it never blocks on them.
   */
  async resetStale(queue: string, owner: string, partitions?: number[]): Promise<void> {
    const op = 'resetStale';
    v.queueOwner(op, queue, owner);
    const parts = partitions === undefined ? null : v.partitions(op, partitions);
    if (parts !== null && parts.length === 0) return;
    await this.#op(op, { 'q.queue': queue }, () => resetStaleRequests(this.#scope, this.pool, owner, queue, parts));
  }

  /**
   * Deletes each request and records its result, in one transaction. `result[i]` is `true` only
   * when completion `i` named a request still in flight under that attempt, in a partition
   * `owner` holds at the request's epoch. Of duplicates of one key, the highest attempt (first
   * on ties) is the one tried; the others report `false`.
   */
  async ack(owner: string, completions: Completion[]): Promise<boolean[]> {
    const op = 'ack';
    v.text(op, 'owner', owner);
    const list = v.list<unknown>(op, 'completions', completions).map((c, i) => v.completion(op, c, i));
    if (list.length === 0) return [];
    const { chosen, statements } = planAck(list);
    const nowMs = Date.now();
    const acked = await this.#op(op, { 'q.batch': list.length }, async () =>
      (await writeChunks(this.pool, statements, (db, rows) => ackRequests(this.#scope, db, owner, rows, nowMs))).flat(),
    );
    if (acked.length > 0) this.#metrics.acked.add(acked.length);
    if (acked.length < list.length) this.#metrics.fenced.add(list.length - acked.length);
    return ackedPositions(list.length, chosen, acked);
  }

  /**
   * Returns requests still carrying the given stamps, in partitions `owner` holds, to pending;
   * they keep their deadline order. Fenced stamps (older attempt, other owner, not in flight,
   * unknown) are skipped.
   */
  async undispatch(owner: string, stamps: Stamp[]): Promise<void> {
    await putBack.undispatch(this.#ctx, owner, stamps);
  }

  /** {@link RequestStore.undispatch}, and the requests are not dispatched again before `notBefore` (Unix s). */
  async defer(owner: string, stamps: Stamp[], notBefore: number): Promise<void> {
    await putBack.defer(this.#ctx, owner, stamps, notBefore);
  }

  /**
   * Parks the request carrying `stamp` until `notBefore` (Unix s) with a new envelope; its
   * payload is kept. `false` when fenced (older attempt, other owner, not in flight, unknown).
   */
  async retry(owner: string, stamp: Stamp, notBefore: number, envelope: string): Promise<boolean> {
    return putBack.retry(this.#ctx, owner, stamp, notBefore, envelope);
  }

  /**
   * Marks every stored generation of the given ids cancelled, pending or in flight (unknown ids
   * are ignored; an empty id is `INVALID_ARGUMENT`). A generation enqueued later starts uncancelled.
   * Resolves with the ids that had a generation to cancel (unknown and already-cancelled ids are
   * not in it), in no particular order.
   */
  async cancel(ids: string[]): Promise<string[]> {
    const op = 'cancel';
    const list = [...new Set(v.list<unknown>(op, 'ids', ids).map((id, i) => v.text(op, `ids[${i}]`, id)))];
    if (list.length === 0) return [];
    return this.#op(op, { 'q.batch': list.length }, () => cancelRequests(this.#scope, this.pool, list));
  }

  /** The subset of `keys` whose request is cancelled (unknown keys are not cancelled). */
  async cancelledKeys(keys: Key[]): Promise<Key[]> {
    const op = 'cancelledKeys';
    const list = v.list<unknown>(op, 'keys', keys).map((k, i) => v.key(op, k, i));
    if (list.length === 0) return [];
    const distinct = [...new Map(list.map((k) => [keyId(k), k])).values()];
    const found = new Set(
      (await this.#op(op, { 'q.batch': distinct.length }, () => selectCancelledKeys(this.#scope, this.pool, distinct))).map(keyId),
    );
    return distinct.filter((k) => found.has(keyId(k)));
  }

  /**
   * Deletes the route's expired results (`0 < expiresAt < now`), then deletes and returns up to
   * `limit` of its results in `seq` order. Concurrent poppers get disjoint results.
   */
  async popResults(route: string, now: number, limit: number): Promise<Result[]> {
    const op = 'popResults';
    v.text(op, 'route', route);
    const at = v.count(op, 'now', now);
    const n = v.limit(op, limit);
    if (n === 0) return [];
    const rows = await this.#op(op, { 'q.route': route, 'q.limit': n }, () => popRouteResults(this.#scope, this.pool, route, at, n));
    if (rows.length > 0) this.#metrics.resultsPopped.add(rows.length);
    return rows;
  }

  /**
   * Up to `limit` live results of `route` in `seq` order, left in place: what the next
   * {@link popResults} would return (expired results are skipped, not deleted).
   */
  async peekResults(route: string, now: number, limit: number): Promise<Result[]> {
    const op = 'peekResults';
    v.text(op, 'route', route);
    const at = v.count(op, 'now', now);
    const n = v.limit(op, limit);
    if (n === 0) return [];
    return this.#op(op, { 'q.route': route, 'q.limit': n }, () => peekRouteResults(this.#scope, this.pool, route, at, n));
  }

  /** Deletes up to `limit` results of any route whose TTL ended before `now`; returns how many. */
  async expireResults(now: number, limit: number): Promise<number> {
    const op = 'expireResults';
    const at = v.count(op, 'now', now);
    const n = v.limit(op, limit);
    if (n === 0) return 0;
    const deleted = await this.#op(op, { 'q.limit': n }, () => expireAnyResults(this.#scope, this.pool, at, n));
    if (deleted > 0) this.#metrics.resultsExpired.add(deleted);
    return deleted;
  }

  /** Results waiting on `route` (expired ones not yet deleted included). */
  async resultDepth(route: string): Promise<number> {
    v.text('resultDepth', 'route', route);
    return this.#op('resultDepth', { 'q.route': route }, () => countResults(this.#scope, this.pool, route));
  }

  /**
   * Pending requests of `queue` (in-flight and cancelled ones are not waiting), the cancelled
   * ones not answered yet, and for each window how many pending ones have
   * `deadline <= now + windows[i]` (Unix s and seconds).
   */
  async backlog(queue: string, now: number, windows: number[]): Promise<Backlog> {
    const op = 'backlog';
    v.text(op, 'queue', queue);
    const at = v.count(op, 'now', now);
    const ws = v.list<unknown>(op, 'windows', windows).map((w, i) => v.count(op, `windows[${i}]`, w));
    return this.#op(op, { 'q.queue': queue }, () => pendingBacklog(this.#scope, this.pool, queue, at, ws));
  }

  /** Who holds `queue`'s partitions: per owner, how many, how many draining, their epochs, lease liveness. */
  async partitionOwners(queue: string): Promise<OwnerPartitions[]> {
    v.text('partitionOwners', 'queue', queue);
    return this.#op('partitionOwners', { 'q.queue': queue }, () => selectPartitionOwners(this.#scope, this.pool, queue));
  }

  /** True when `queue` has a pending request. */
  async hasRequests(queue: string): Promise<boolean> {
    v.text('hasRequests', 'queue', queue);
    return this.#op('hasRequests', { 'q.queue': queue }, () => anyPending(this.#scope, this.pool, queue));
  }

  /** Empties every request-queue table (requests, partitions, dispatchers, results). Tests only. */
  async truncateForTest(): Promise<void> {
    await this.#op('truncateForTest', undefined, () => truncateAll(this.#scope, this.pool));
  }

  #op<T>(name: string, attrs: Attrs | undefined, fn: () => Promise<T>): Promise<T> {
    return runOperation(this.#operations, name, fn, attrs);
  }
}

/**
 * The request queue's former name: the same class (`new`, `Store.open`, `Store.fromPool`,
 * `instanceof` and type positions all still work).
 *
 * @deprecated Use {@link RequestStore}.
 */
export const Store = RequestStore;
/** @deprecated Use {@link RequestStore}. */
export type Store = RequestStore;
