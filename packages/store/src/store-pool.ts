// How both stores come by their pool: `open` opens one of its own (see openStorePool), `fromPool`
// checks the one it is given (see checkPool). What each store then does on it (migrate, read its
// schema) is its own.
import { instrumentPool } from '@q/otel';
import { invalidArgument, openPool } from '@q/schema';
import type pg from 'pg';
import type { OpenOptions } from './options.js';

/** What differs between the pools of the two stores. */
export interface StorePoolSettings {
  /** `application_name` of the pool's connections (`q-store`, `q-jobs` unless the options name one). */
  readonly applicationName: string;
  /** Turn JIT off on each connection (the job store's, outside a transaction pooler; see `openPool`). */
  readonly jitOff?: boolean;
}

/**
 * Opens the pool of a store's `open` on `dsn` (validated and pinged by `openPool`; `maxConns`,
 * default 10; idle connections closed after `idleTimeoutMillis`, default 30 s; statements traced
 * through `tracerProvider`) and hands it to `bind`, which readies the store on it. Whatever `bind`
 * throws ends the pool first, so it (and its connections) is never left behind, and is rethrown
 * as `onError` maps it.
 */
export async function openStorePool<T>(
  dsn: string,
  opts: OpenOptions,
  settings: StorePoolSettings,
  bind: (pool: pg.Pool) => Promise<T>,
  onError: (err: unknown) => unknown = (err) => err,
): Promise<T> {
  const pool = await openPool(dsn, {
    maxConns: opts.maxConns,
    ...(opts.idleTimeoutMillis !== undefined ? { idleTimeoutMillis: opts.idleTimeoutMillis } : {}),
    applicationName: settings.applicationName,
    instrument: (p) => instrumentPool(p, opts.tracerProvider),
    ...(settings.jitOff === true ? { jitOff: true } : {}),
  });
  try {
    return await bind(pool);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw onError(err);
  }
}

/** Throws `INVALID_ARGUMENT` unless `pool` looks like a `pg.Pool` (`op`: `RequestStore.fromPool`, `JobStore.fromPool`). */
export function checkPool(op: string, pool: unknown): asserts pool is pg.Pool {
  const p = pool as { query?: unknown; connect?: unknown } | null;
  if (typeof pool !== 'object' || p === null || typeof p.query !== 'function' || typeof p.connect !== 'function') {
    throw invalidArgument(`${op}: pool must be a pg.Pool`);
  }
}
