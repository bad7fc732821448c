import { QError, QErrorCode, invalidArgument, type Queryable } from '@q/schema';
import { StatementScope, checkPlacement, checkSchemaName, databaseError } from '@q/schema/internal';
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
