import { JOURNAL_TABLE } from './migrate.js';
import { MIGRATION_MODULES, bundledMigrations, type MigrationModule } from './migrations.js';
import { SCHEMA_TOKEN, StatementScope, checkSchemaName, quoteIdent, statement, type Queryable } from './statement.js';

// What q has installed in a schema, read from the migration journal `migrate()` writes: the one
// record of which modules exist there, whatever their tables are called in this or a later build.
// Reading it never creates anything, so a command can ask before it would create tables.

const currentSchemaStatement = statement('q_schema_current_schema', `SELECT current_schema() AS schema`);

const journalPresentStatement = statement('q_schema_journal_present', `SELECT to_regclass($1) IS NOT NULL AS present`);

const journalStatement = statement(
  'q_schema_journal_tags',
  `SELECT module, tag FROM ${SCHEMA_TOKEN}.${JOURNAL_TABLE} WHERE module = ANY ($1::text[]) ORDER BY module, tag`,
);

/** Options of {@link migrationStatus} and {@link installedModules}. */
export interface InstalledOptions {
  /** The schema to look in. Absent: the connection's current schema (`search_path`). */
  schema?: string;
  /** The modules to report. Default: all of {@link MIGRATION_MODULES}. */
  modules?: readonly MigrationModule[];
}

/** One module's migrations in a schema. */
export interface ModuleMigrationStatus {
  module: MigrationModule;
  /** The schema looked in; `null` when the search_path names no existing schema. */
  schema: string | null;
  /** Tags recorded in the journal, in order. */
  applied: string[];
  /** Tags this build ships that the journal does not hold, in apply order. */
  pending: string[];
  /** Whether any migration of the module is applied (its tables exist). */
  installed: boolean;
}

/**
 * The migration state of each module in a schema, read from the journal (no DDL, nothing
 * created). A schema without a journal (or a missing schema) has every module pending.
 */
export async function migrationStatus(db: Queryable, opts: InstalledOptions = {}): Promise<ModuleMigrationStatus[]> {
  const modules = [...new Set(opts.modules ?? MIGRATION_MODULES)];
  const schema = opts.schema === undefined ? await currentSchema(db) : checkSchemaName('migrationStatus', opts.schema);
  const applied = new Map<string, string[]>(modules.map((m) => [m, []]));
  if (schema !== undefined) {
    const scope = new StatementScope(schema);
    const { rows } = await scope.run<{ present: boolean }>(db, journalPresentStatement, [`${quoteIdent(schema)}.${JOURNAL_TABLE}`]);
    if (rows[0]?.present) {
      const journal = await scope.run<{ module: string; tag: string }>(db, journalStatement, [modules]);
      for (const r of journal.rows) applied.get(r.module)?.push(r.tag);
    }
  }
  return modules.map((module) => {
    const done = applied.get(module) ?? [];
    const have = new Set(done);
    return {
      module,
      schema: schema ?? null,
      applied: done,
      pending: bundledMigrations(module)
        .map((m) => m.tag)
        .filter((t) => !have.has(t)),
      installed: done.length > 0,
    };
  });
}

/**
 * Which q modules are migrated in a schema (the connection's current one unless `opts.schema`):
 * `true` for each module with at least one migration in the journal.
 */
export async function installedModules(db: Queryable, opts: InstalledOptions = {}): Promise<Record<MigrationModule, boolean>> {
  const out = Object.fromEntries(MIGRATION_MODULES.map((m) => [m, false])) as Record<MigrationModule, boolean>;
  for (const s of await migrationStatus(db, opts)) out[s.module] = s.installed;
  return out;
}

async function currentSchema(db: Queryable): Promise<string | undefined> {
  // current_schema() is null when no schema of the search_path exists: nothing is installed.
  // Sent unnamed: no scope exists before the schema is known, and this runs once per call.
  const { rows } = await db.query<{ schema: string | null }>({ text: currentSchemaStatement.text });
  return rows[0]?.schema ?? undefined;
}
