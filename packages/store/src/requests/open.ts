import { instrumentPool } from '@q/otel';
import { QError, QErrorCode, invalidArgument, openPool, type Queryable } from '@q/schema';
import { StatementScope, checkPlacement, checkSchemaName, databaseError, resolveMaxConns } from '@q/schema/internal';
import type pg from 'pg';
import type { FromPoolOptions, OpenOptions } from '../options.js';
import * as v from './validate.js';

/** Throws `INVALID_ARGUMENT` for a malformed options object of `op` (`RequestStore.open` / `RequestStore.fromPool`). */
export function checkStoreOptions(op: string, opts: unknown): asserts opts is OpenOptions & FromPoolOptions {
  if (typeof opts !== 'object' || opts === null) throw invalidArgument(`${op}: options must be an object`);
  const o = opts as OpenOptions;
  if (o.migrate !== undefined && typeof o.migrate !== 'boolean') throw invalidArgument(`${op}: migrate must be a boolean`);
  if (o.schema !== undefined) checkSchemaName(op, o.schema);
  if (o.pooler !== undefined && o.pooler !== 'transaction') throw invalidArgument(`${op}: pooler must be 'transaction' or absent`);
  // A negative or zero cap used to mean the default (10) silently: a typo would size the pool.
  if (o.maxConns !== undefined && (typeof o.maxConns !== 'number' || !Number.isSafeInteger(o.maxConns) || o.maxConns < 1)) {
    throw invalidArgument(`${op}: maxConns must be an integer >= 1, got ${String(o.maxConns)}`);
  }
  // Checked before a pool exists: a bad provider used to throw a TypeError and leak the pool.
  v.provider(op, 'tracerProvider', o.tracerProvider, 'getTracer');
  v.provider(op, 'meterProvider', o.meterProvider, 'getMeter');
  if (o.applicationName !== undefined) v.anyText(op, 'applicationName', o.applicationName);
  // listenDsn: unused by the request queue, but a DSN all the same, checked as every store checks it.
  checkPlacement(op, o);
}

/**
 * The statement scope of a store: `opts.schema`, or the connection's current schema read once
 * now, so later statements never depend on a session's `search_path`. Transaction poolers get
 * unnamed statements.
 */
export async function resolveScope(op: string, db: Queryable, opts: { schema?: string; pooler?: 'transaction' }): Promise<StatementScope> {
  const named = opts.pooler !== 'transaction';
  if (opts.schema !== undefined) return new StatementScope(opts.schema, { named });
  const { rows } = await db.query<{ schema: string | null }>({ text: 'SELECT current_schema() AS schema' });
  const schema = rows[0]?.schema;
  if (!schema) {
    throw new QError(
      QErrorCode.SCHEMA_MISMATCH,
      `${op}: no current schema (the first schema of search_path does not exist): pass the schema option`,
    );
  }
  return new StatementScope(schema, { named });
}

/** {@link resolveScope} for `op`, a failure of the query reported as a `QError`. */
export function scopeOf(op: string, db: Queryable, opts: { schema?: string; pooler?: 'transaction' }): Promise<StatementScope> {
  return resolveScope(op, db, opts).catch((err: unknown) => {
    throw databaseError(op, err);
  });
}

/**
 * Opens the pool of `RequestStore.open` (`maxConns`, default 10; idle connections closed after 30 s),
 * resolves the store's scope and hands both to `init`. Whatever fails after the pool opened ends
 * it, so it (and its connections) is never left behind.
 */
export async function withOwnedPool<T>(dsn: string, opts: OpenOptions, init: (pool: pg.Pool, scope: StatementScope) => Promise<T>): Promise<T> {
  const pool = await openPool(dsn, {
    maxConns: resolveMaxConns(opts.maxConns),
    ...(opts.idleTimeoutMillis !== undefined ? { idleTimeoutMillis: opts.idleTimeoutMillis } : {}),
    applicationName: opts.applicationName ?? 'q-store',
    // An idle connection whose backend went away is dropped by pg and replaced on demand.
    onIdleError: () => undefined,
    instrument: (p) => instrumentPool(p, opts.tracerProvider),
  });
  try {
    return await init(pool, await scopeOf('RequestStore.open', pool, opts));
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw err;
  }
}

/** Throws `INVALID_ARGUMENT` unless `pool` looks like a `pg.Pool` (for `RequestStore.fromPool`). */
export function checkPool(pool: unknown): asserts pool is pg.Pool {
  const p = pool as { query?: unknown; connect?: unknown } | null;
  if (typeof pool !== 'object' || p === null || typeof p.query !== 'function' || typeof p.connect !== 'function') {
    throw invalidArgument('RequestStore.fromPool: pool must be a pg.Pool');
  }
}
