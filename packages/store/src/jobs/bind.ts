import { QError, QErrorCode, checkSchemaName, invalidArgument, migrate } from '@q/schema';
import type pg from 'pg';
import type { JobStoreSchemaOptions } from './options.js';

/** Checks the `schema` and `pooler` options; returns the schema asked for, if any. */
export function checkSchemaOptions(op: string, opts: JobStoreSchemaOptions): string | undefined {
  if (opts.pooler !== undefined && opts.pooler !== 'transaction') throw invalidArgument(`${op}: pooler must be 'transaction' or absent`);
  return opts.schema === undefined ? undefined : checkSchemaName(op, opts.schema);
}

/**
 * Migrates (when asked) and returns the schema the store binds to: `asked`, or the connection's
 * `current_schema()`. A schema asked for but missing (not migrated) is `CONFIG`.
 */
export async function bindSchema(pool: pg.Pool, asked: string | undefined, migrating: boolean): Promise<string> {
  if (migrating) await migrate(pool, { modules: ['jobs'], ...(asked !== undefined ? { schema: asked } : {}) });
  if (asked !== undefined) {
    const { rows } = await pool.query<{ ok: boolean }>({ text: 'SELECT to_regnamespace($1) IS NOT NULL AS ok', values: [asked] });
    if (rows[0]?.ok !== true) throw new QError(QErrorCode.CONFIG, `the schema "${asked}" does not exist (open with migrate to create it)`);
    return asked;
  }
  const { rows } = await pool.query<{ schema: string | null }>('SELECT current_schema() AS schema');
  const schema = rows[0]?.schema;
  if (!schema) throw new QError(QErrorCode.CONFIG, 'the connection has no current schema (check search_path)');
  return schema;
}
