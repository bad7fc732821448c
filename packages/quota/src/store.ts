import type { Tracer } from '@opentelemetry/api';
import { instrumentPool, qTracer, quotaKeyClass, quotaMetrics, withOperation, type QuotaMetrics } from '@q/otel';
import { QError, QErrorCode, QuotaHolderLapsedError, invalidArgument, migrate, openPool } from '@q/schema';
import {
  StatementScope,
  checkName as checkStorableName,
  checkPlacement,
  checkSchemaName,
  databaseError,
  resolveIdleTimeout,
  resolveMaxConns,
} from '@q/schema/internal';
import type pg from 'pg';
import { closedError } from './errors.js';
import type { FromPoolOptions, OpenOptions } from './options.js';
import { acquireQuotaSlots } from './sql/acquire-quota-slots.js';
import { admitQuota } from './sql/admit-quota.js';
import { deleteQuotaHolder } from './sql/delete-quota-holder.js';
import { reapQuota } from './sql/reap-quota.js';
import { reapQuotaHolders } from './sql/reap-quota-holders.js';
import { registerQuotaHolder } from './sql/register-quota-holder.js';
import { releaseQuotaSlots } from './sql/release-quota-slots.js';
import { renewQuotaHolder } from './sql/renew-quota-holder.js';
import { MAX_INT4, checkInt, checkName, checkProvider, checkRelease } from './validate.js';

/**
 * Distributed concurrency slots and sliding-window rate admission, counted in Postgres with the
 * database clock. Slots belong to *holders*: leased names whose slots count only while the lease
 * is live, so a crashed process's slots come back once its lease lapses.
 *
 * Most users want the {@link Quota} client (`createQuota`), which manages holders, batching and
 * releases on top of this store.
 */
export class QuotaStore {
  readonly #pool: pg.Pool;
  readonly #ownsPool: boolean;
  readonly #tracer: Tracer | undefined;
  readonly #metrics: QuotaMetrics;
  readonly #named: boolean;
  // Bound once: at open (schema option, or the connection's current schema), or, for fromPool
  // without a schema, on the first call (fromPool is synchronous).
  #scope: StatementScope | Promise<StatementScope>;
  #closed = false;

  private constructor(pool: pg.Pool, ownsPool: boolean, scope: StatementScope | undefined, opts: FromPoolOptions) {
    this.#pool = pool;
    this.#ownsPool = ownsPool;
    this.#tracer = qTracer(opts.tracerProvider);
    this.#metrics = quotaMetrics(opts.meterProvider);
    this.#named = opts.pooler !== 'transaction';
    this.#scope = scope ?? this.#currentScope();
    // A failed first read is reported by the call that awaits it; never an unhandled rejection.
    if (this.#scope instanceof Promise) this.#scope.catch(() => undefined);
  }

  /**
   * Opens a pool on `dsn` (validated, pinged; errors never show the password; at most `maxConns`
   * connections, default 10, idle ones closed after 30 s) and, unless `opts.migrate === false`,
   * migrates the `quota` module only, into `opts.schema` (created if missing) or the
   * connection's current schema.
   */
  static async open(dsn: string, opts: OpenOptions = {}): Promise<QuotaStore> {
    checkStoreOptions('QuotaStore.open', opts);
    const pool = await openPool(dsn, {
      maxConns: opts.maxConns,
      ...(opts.idleTimeoutMillis !== undefined ? { idleTimeoutMillis: opts.idleTimeoutMillis } : {}),
      applicationName: opts.applicationName ?? 'q-quota',
      instrument: (p) => void instrumentPool(p, opts.tracerProvider),
    });
    try {
      if (opts.migrate !== false) await migrate(pool, { modules: ['quota'], ...(opts.schema !== undefined ? { schema: opts.schema } : {}) });
      const store = new QuotaStore(
        pool,
        true,
        opts.schema === undefined ? undefined : new StatementScope(opts.schema, { named: opts.pooler !== 'transaction' }),
        opts,
      );
      await store.#bound('open');
      return store;
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
  }

  /**
   * Wraps a pool you own (and close). Does not migrate: call `migrate(pool, { modules: ['quota'],
   * schema })` from `@q/schema` first. Statements name `opts.schema`, or the pool's current
   * schema read on the first call; stores of different schemas may share one pool. Statement
   * spans need `instrumentPool` from `@q/otel` on that pool.
   */
  static fromPool(pool: pg.Pool, opts: FromPoolOptions = {}): QuotaStore {
    if (!pool || typeof (pool as { query?: unknown }).query !== 'function') {
      throw invalidArgument('QuotaStore.fromPool: pool must be a pg.Pool');
    }
    checkStoreOptions('QuotaStore.fromPool', opts);
    const named = opts.pooler !== 'transaction';
    return new QuotaStore(pool, false, opts.schema === undefined ? undefined : new StatementScope(opts.schema, { named }), opts);
  }

  /** The schema this store's statements name (resolved at open, or by the first call of a `fromPool` store). */
  async schema(): Promise<string> {
    return (await this.#bound('schema')).schema;
  }

  /** The pool this store runs on. */
  get pool(): pg.Pool {
    return this.#pool;
  }

  /**
   * Registers `holder` with a lease of `ttlMs` from now (database clock). Names are single-use:
   * a name that exists (even lapsed) fails with `DUPLICATE`.
   */
  async registerQuotaHolder(holder: string, ttlMs: number): Promise<void> {
    checkName('holder', holder);
    checkInt('ttlMs', ttlMs, 1);
    await this.#run('register_holder', (scope) => registerQuotaHolder(scope, this.#pool, holder, ttlMs));
  }

  /**
   * Extends a live holder's lease to `ttlMs` from now. `false` once it lapsed, or when it is
   * unknown or deleted: a lapsed holder is never revived, so its slots never count again. A
   * renewal that finds the lease over records the lapse in the holder's row, so a later step back
   * of the database clock does not undo it either.
   */
  async renewQuotaHolder(holder: string, ttlMs: number): Promise<boolean> {
    checkName('holder', holder);
    checkInt('ttlMs', ttlMs, 1);
    return this.#run('renew_holder', (scope) => renewQuotaHolder(scope, this.#pool, holder, ttlMs));
  }

  /** Deletes a holder and its slots, which stop counting at once. Idempotent. */
  async deleteQuotaHolder(holder: string): Promise<void> {
    checkName('holder', holder);
    await this.#run('delete_holder', (scope) => deleteQuotaHolder(scope, this.#pool, holder));
  }

  /** Deletes holders that lapsed more than `graceMs` ago, with their slots. Recently lapsed ones are kept. */
  async reapQuotaHolders(graceMs: number): Promise<void> {
    checkInt('graceMs', graceMs, 0);
    await this.#run('reap_holders', (scope) => reapQuotaHolders(scope, this.#pool, graceMs));
  }

  /**
   * Grants up to `n` slots of `key` to `holder`, so that the slots of `key` held by live holders
   * never exceed `limit` (the limit is per call: callers with different limits on one key share
   * one count). Acquires on one key serialise across processes. Every holder it counts as lapsed
   * (its own one included) is recorded as lapsed, so no clock step revives slots it gave away.
   * Returns the grant, `0..n`.
   * @throws QuotaHolderLapsedError when `holder` lapsed, is unknown or was deleted.
   */
  async acquireQuotaSlots(holder: string, key: string, n: number, limit: number): Promise<number> {
    checkName('holder', holder);
    checkName('key', key);
    checkInt('n', n, 0, MAX_INT4);
    checkInt('limit', limit, 0, MAX_INT4);
    const keyClass = quotaKeyClass(key);
    const granted = await this.#run('acquire', (scope) => acquireQuotaSlots(scope, this.#pool, holder, key, n, limit), keyClass);
    if (granted < 0) throw new QuotaHolderLapsedError(holder);
    this.#count('slots', keyClass, granted, n - granted);
    return granted;
  }

  /**
   * Gives back `counts[i]` slots of `keys[i]` held by `holder`. Touches only the holder's own
   * slots and never goes below zero; unknown keys are ignored. Different lengths are
   * `INVALID_ARGUMENT` before any statement is sent.
   */
  async releaseQuotaSlots(holder: string, keys: string[], counts: number[]): Promise<void> {
    checkName('holder', holder);
    checkRelease(keys, counts);
    if (keys.length === 0) return;
    await this.#run('release', (scope) => releaseQuotaSlots(scope, this.#pool, holder, keys, counts));
  }

  /**
   * Admits up to `n` units of `key` so that no trailing window of `windowMs` holds more than
   * `limit` admissions (exact sliding window on the database clock; each window length keeps its
   * own log). Returns the number admitted, `0..n`.
   */
  async admitQuota(key: string, n: number, limit: number, windowMs: number): Promise<number> {
    checkName('key', key);
    checkInt('n', n, 0, MAX_INT4);
    checkInt('limit', limit, 0, MAX_INT4);
    checkInt('windowMs', windowMs, 1);
    const keyClass = quotaKeyClass(key);
    const granted = await this.#run('admit', (scope) => admitQuota(scope, this.#pool, key, n, limit, windowMs), keyClass);
    this.#count('rate', keyClass, granted, n - granted);
    return granted;
  }

  /**
   * Deletes up to `limit` rows of each kind that no longer count: expired admissions (window
   * counts stay exact), empty windows and slots, and keys no slot names. Takes the same row locks
   * as acquire and admit (skipping rows in use), so it never races them. Returns the number of
   * windows updated plus rows deleted.
   */
  async reapQuota(limit: number): Promise<number> {
    checkInt('limit', limit, 1, MAX_INT4);
    return this.#run('reap', (scope) => reapQuota(scope, this.#pool, limit));
  }

  /** Closes the pool if this store opened it. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsPool) await this.#pool.end();
  }

  async #run<T>(op: string, fn: (scope: StatementScope) => Promise<T>, keyClass?: string): Promise<T> {
    if (this.#closed) throw closedError('QuotaStore');
    return withOperation(
      this.#tracer,
      `q.quota.${op}`,
      async () => {
        try {
          return await fn(await this.#bound(op));
        } catch (err) {
          throw databaseError(`quota ${op}`, err, TAKEN_NAME);
        }
      },
      keyClass === undefined ? undefined : { 'quota.key_class': keyClass },
    );
  }

  async #bound(op: string): Promise<StatementScope> {
    try {
      return await this.#scope;
    } catch (err) {
      // Not cached: the next call reads the schema again (the database may be back).
      this.#scope = this.#currentScope();
      this.#scope.catch(() => undefined);
      throw databaseError(`quota ${op}`, err);
    }
  }

  async #currentScope(): Promise<StatementScope> {
    const { rows } = await this.#pool.query<{ schema: string | null }>('SELECT current_schema() AS schema');
    const schema = rows[0]?.schema;
    if (!schema) {
      throw new QError(
        QErrorCode.SCHEMA_MISMATCH,
        'QuotaStore: no current schema (the first schema of search_path does not exist): pass the schema option',
      );
    }
    const scope = new StatementScope(schema, { named: this.#named });
    this.#scope = scope;
    return scope;
  }

  #count(kind: 'slots' | 'rate', keyClass: string, granted: number, refused: number): void {
    const attributes = { 'quota.kind': kind, 'quota.key_class': keyClass };
    if (granted > 0) this.#metrics.grants.add(granted, attributes);
    if (refused > 0) this.#metrics.refusals.add(refused, attributes);
  }
}

const TAKEN_NAME = { duplicate: 'the name is already taken' };

/** Checks the store options of `opts` (schema, pooler, listenDsn, migrate, pool sizes) before anything opens. */
export function checkStoreOptions(op: string, opts: unknown): void {
  if (typeof opts !== 'object' || opts === null) throw invalidArgument(`${op}: options must be an object`);
  const o = opts as OpenOptions;
  if (o.schema !== undefined) checkSchemaName(op, o.schema);
  checkPlacement(op, o);
  if (o.migrate !== undefined && typeof o.migrate !== 'boolean') throw invalidArgument(`${op}: migrate must be a boolean or absent`);
  if (o.applicationName !== undefined) checkStorableName(op, 'applicationName', o.applicationName);
  resolveMaxConns(o.maxConns);
  resolveIdleTimeout(o.idleTimeoutMillis);
  checkProvider(op, 'tracerProvider', o.tracerProvider, 'getTracer');
  checkProvider(op, 'meterProvider', o.meterProvider, 'getMeter');
}
