import type pg from 'pg';
import { QError, QErrorCode, invalidArgument } from './errors.js';
import { checkSchemaName, quoteIdent } from './statement.js';
import { checkResolvedSchema, checkSchemaGrants, checkServerVersion, readSession } from './schema-check.js';
import { MIGRATION_MODULES, bundledBaseline, bundledMigrations, type BundledMigration, type MigrationModule } from './migrations.js';

/** Name of the journal table, created in the connection's current schema. */
export const JOURNAL_TABLE = 'q_schema_migrations';

// Two-key advisory lock: (constant, schema) so migrations of different schemas do not queue.
const LOCK_CLASS = 0x71_6d_69_67; // "qmig"

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** The modules to bring up to date; others are left alone. */
  modules: MigrationModule[];
  /**
   * The schema to migrate into, created if missing (`CREATE SCHEMA IF NOT EXISTS`: needs CREATE on
   * the database only when it is missing). Absent: the connection's current schema (`search_path`).
   */
  schema?: string;
}

interface JournalRow {
  module: string;
  tag: string;
  hash: string;
}

/**
 * Applies the pending migrations of `opts.modules` in the connection's current schema
 * (`search_path`), recording each in a journal table in that schema.
 *
 * - Refuses PostgreSQL older than 13 with `CONFIG` before any change.
 * - Refuses, with `SCHEMA_MISMATCH` naming the cause, a session that resolved to another schema
 *   than the one asked for (a first `search_path` schema that is missing or lacks USAGE, a DSN
 *   `options` search_path a pooler dropped) and a schema this role lacks USAGE or CREATE on.
 *
 * - Safe under concurrency: writers serialise on a transaction-scoped advisory lock and re-check
 *   the journal under it, so every caller succeeds and each object is created once.
 * - A schema that is already current is detected with two plain reads: no DDL, no DDL lock.
 * - A journal holding a migration this build does not ship (a newer or different build) is
 *   refused with `SCHEMA_MISMATCH`, and nothing is changed.
 */
export async function migrate(pool: pg.Pool, opts: MigrateOptions): Promise<void> {
  const modules = checkModules(opts?.modules);
  const asked = opts.schema === undefined ? undefined : checkSchemaName('migrate', opts.schema);
  const wanted = modules.flatMap((m) => bundledMigrations(m));
  const client = await pool.connect();
  let broken = false;
  try {
    const facts = await readSession(client);
    checkServerVersion(facts.versionNum);
    // A schema the session did not resolve the way the connection asked is refused, naming why.
    const schema = asked ?? (await checkResolvedSchema(client, pool, facts));
    if (asked !== undefined) await checkSchemaGrants(client, asked, false);
    if (pendingAfterCheck(wanted, await readJournal(client, schema, modules)).length === 0) return;
    if (asked !== undefined) await ensureSchema(client, asked);
    await checkSchemaGrants(client, schema, true);

    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1::int, hashtext($2))', [LOCK_CLASS, schema]);
      // The migration files name their objects unqualified: they land in the first schema of the
      // search_path, set for this transaction only (functions created with `SET search_path FROM
      // CURRENT` keep it).
      if (asked !== undefined) await client.query(`SET LOCAL search_path TO ${quoteIdent(asked)}`);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${quoteIdent(schema)}.${JOURNAL_TABLE} (
           module text NOT NULL, tag text NOT NULL, hash text NOT NULL,
           applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (module, tag))`,
      );
      // Another process may have migrated while we waited for the lock.
      const pending = pendingAfterCheck(wanted, await readJournal(client, schema, modules));
      for (const module of modules) {
        const mine = pending.filter((m) => m.module === module);
        // A module none of whose migrations ran yet starts from its baseline: the same objects,
        // without ever creating the old unprefixed names an application's tables may hold.
        const base = mine.length === bundledMigrations(module).length ? bundledBaseline(module) : undefined;
        if (base) await client.query(base.sql);
        for (const m of mine) {
          if (!base || m.tag > base.through) for (const statement of m.statements) await client.query(statement);
          await client.query(`INSERT INTO ${quoteIdent(schema)}.${JOURNAL_TABLE} (module, tag, hash) VALUES ($1, $2, $3)`, [
            m.module,
            m.tag,
            m.hash,
          ]);
        }
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      if (err instanceof QError) throw err;
      throw new QError(QErrorCode.MIGRATION_FAILED, `migrate: ${(err as Error).message}`, { cause: err });
    }
  } finally {
    client.release(broken);
  }
}

function checkModules(modules: unknown): MigrationModule[] {
  if (!Array.isArray(modules) || modules.length === 0) {
    throw invalidArgument(`migrate: modules must be a non-empty array of ${MIGRATION_MODULES.join(', ')}`);
  }
  for (const m of modules) {
    if (!(MIGRATION_MODULES as readonly unknown[]).includes(m)) {
      throw invalidArgument(`migrate: modules must be among ${MIGRATION_MODULES.join(', ')} (got "${String(m)}")`);
    }
  }
  return [...new Set(modules as MigrationModule[])];
}

async function readJournal(client: pg.PoolClient, schema: string, modules: MigrationModule[]): Promise<JournalRow[]> {
  const { rows } = await client.query<{ present: boolean }>('SELECT to_regclass($1) IS NOT NULL AS present', [
    `${quoteIdent(schema)}.${JOURNAL_TABLE}`,
  ]);
  if (!rows[0]?.present) return [];
  const journal = await client.query<JournalRow>(
    `SELECT module, tag, hash FROM ${quoteIdent(schema)}.${JOURNAL_TABLE} WHERE module = ANY($1::text[]) ORDER BY module, tag`,
    [modules],
  );
  return journal.rows;
}

/** Returns the migrations still to apply, or throws SCHEMA_MISMATCH if the journal is foreign. */
function pendingAfterCheck(wanted: BundledMigration[], applied: JournalRow[]): BundledMigration[] {
  const byKey = new Map(wanted.map((m) => [`${m.module}/${m.tag}`, m]));
  for (const row of applied) {
    const mine = byKey.get(`${row.module}/${row.tag}`);
    if (!mine) {
      throw new QError(
        QErrorCode.SCHEMA_MISMATCH,
        `migrate: the database has migration ${row.module}/${row.tag}, which this build does not know (created by a newer or different build)`,
      );
    }
    if (mine.hash !== row.hash) {
      throw new QError(
        QErrorCode.SCHEMA_MISMATCH,
        `migrate: migration ${row.module}/${row.tag} in the database differs from this build's (created by a different build)`,
      );
    }
  }
  const done = new Set(applied.map((r) => `${r.module}/${r.tag}`));
  const pending = wanted.filter((m) => !done.has(`${m.module}/${m.tag}`));
  // A gap (a later migration applied, an earlier one missing) means another build wrote it.
  for (const m of pending) {
    const later = wanted.find((w) => w.module === m.module && w.tag > m.tag && done.has(`${w.module}/${w.tag}`));
    if (later) {
      throw new QError(
        QErrorCode.SCHEMA_MISMATCH,
        `migrate: migration ${m.module}/${m.tag} is missing while ${later.tag} is applied (created by a different build)`,
      );
    }
  }
  return pending;
}

/**
 * Creates `schema` if it does not exist. An existing schema needs no privilege here (its
 * USAGE/CREATE are checked by the migration itself); a missing one needs CREATE on the database.
 */
async function ensureSchema(client: pg.PoolClient, schema: string): Promise<void> {
  const { rows } = await client.query<{ present: boolean }>('SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS present', [schema]);
  if (rows[0]?.present) return;
  try {
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === '42501') {
      throw new QError(
        QErrorCode.SCHEMA_MISMATCH,
        `migrate: schema "${schema}" does not exist and this role may not create it (needs CREATE on the database, or create the schema first)`,
        { cause: err },
      );
    }
    // 23505 / 42P06: a concurrent caller created it first.
    if (code !== '23505' && code !== '42P06') {
      throw new QError(QErrorCode.MIGRATION_FAILED, `migrate: cannot create schema "${schema}": ${(err as Error).message}`, { cause: err });
    }
  }
}
