import { QError, QErrorCode, migrate, type StoreConnectionOptions } from '@q/schema';
import { checkSchemaName, databaseError } from '@q/schema/internal';
import type pg from 'pg';
import { poolError } from './from-pool.js';
import type { JobStoreOpenOptions } from './options.js';
import { openStorePool } from '../store-pool.js';

/** Checks the `schema` option (`pooler` is `checkPlacement`'s); returns the schema asked for, if any. */
export function checkSchemaOptions(op: string, opts: Pick<StoreConnectionOptions, 'schema'>): string | undefined {
  return opts.schema === undefined ? undefined : checkSchemaName(op, opts.schema);
}

/**
 * Migrates (when asked) and returns the schema the store binds to: `asked`, or the connection's
 * `current_schema()`. A schema asked for but missing (not migrated) is `CONFIG`. Behind a
 * transaction pooler without `schema` and without migrating, the current schema must hold the job
 * table: a pooler may drop the DSN's `search_path` option, and the store would silently bind to
 * whatever schema its server connections have (`public`).
 */
export async function bindSchema(pool: pg.Pool, asked: string | undefined, migrating: boolean, pooler?: 'transaction'): Promise<string> {
  if (migrating) await migrate(pool, { modules: ['jobs'], ...(asked !== undefined ? { schema: asked } : {}) });
  if (asked !== undefined) {
    // The name as given, compared as is: to_regnamespace would parse it as SQL (folding capitals,
    // refusing a blank), which is not how the migration created it.
    const { rows } = await pool.query<{ ok: boolean }>({
      text: 'SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS ok',
      values: [asked],
    });
    if (rows[0]?.ok !== true) throw new QError(QErrorCode.CONFIG, `the schema "${asked}" does not exist (open with migrate to create it)`);
    return asked;
  }
  const { rows } = await pool.query<{ schema: string | null; tables: boolean | null }>(
    "SELECT current_schema() AS schema, to_regclass(format('%I.q_jobs', current_schema())) IS NOT NULL AS tables",
  );
  const schema = rows[0]?.schema;
  if (!schema) throw new QError(QErrorCode.CONFIG, 'the connection has no current schema (check search_path)');
  if (pooler === 'transaction' && !migrating && rows[0]?.tables !== true) {
    throw new QError(
      QErrorCode.CONFIG,
      `open: the current schema "${schema}" has no job tables; behind a transaction pooler the DSN's search_path may not apply: pass the schema option (or migrate)`,
    );
  }
  return schema;
}

/**
 * The pool of `JobStore.open` on `dsn`, bound to its schema (see {@link bindSchema}); a failure
 * after the pool opened ends it (see `openStorePool`) and is a `QError` of `open`.
 */
export async function openBoundPool(
  dsn: string,
  opts: JobStoreOpenOptions,
  asked: string | undefined,
  applicationName: string,
): Promise<{ pool: pg.Pool; schema: string }> {
  return openStorePool(
    dsn,
    opts,
    { applicationName, jitOff: opts.pooler !== 'transaction' },
    async (pool) => ({ pool, schema: await bindSchema(pool, asked, opts.migrate !== false, opts.pooler) }),
    (err) => databaseError('open', err),
  );
}

/** {@link bindSchema} through an application's pool (`JobStore.fromPool`): a failure other than `CONFIG` is a pool error. */
export async function bindAppPool(pool: pg.Pool, asked: string | undefined, migrating: boolean, pooler?: 'transaction'): Promise<string> {
  try {
    return await bindSchema(pool, asked, migrating, pooler);
  } catch (err) {
    throw err instanceof QError && err.code === QErrorCode.CONFIG ? err : poolError(err);
  }
}
