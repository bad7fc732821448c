// Client commands and `demo --dsn` open an existing database: they must not create q's tables in
// it behind the user's back. They open the store without migrating, read the migration journal,
// and go on only when the tables are current — or when `--migrate` says to create or upgrade them.
import { migrate, migrationStatus, QError, QErrorCode, type MigrationModule } from '@q/schema';
import { RequestStore } from '@q/store';

/**
 * Checks that `modules` are migrated (and current) in `store`'s schema; with `migrate`, brings
 * them up to date instead. Otherwise throws `SCHEMA_MISMATCH` naming the schema and what is missing
 * (the CLI exits 2).
 */
export async function requireTables(
  store: RequestStore,
  modules: MigrationModule[],
  opts: { command: string; migrate: boolean; schema?: string },
): Promise<void> {
  const inSchema = opts.schema !== undefined ? { schema: opts.schema } : {};
  const status = await migrationStatus(store.pool, { modules, ...inSchema });
  const behind = status.filter((s) => s.pending.length > 0);
  if (behind.length === 0) return;
  if (opts.migrate) {
    await migrate(store.pool, { modules, ...inSchema });
    return;
  }
  const where = status[0]?.schema ? `schema "${status[0].schema}"` : 'this database (no schema of its search_path exists)';
  const missing = behind.filter((s) => !s.installed).map((s) => s.module);
  const older = behind.filter((s) => s.installed).map((s) => s.module);
  const what = [
    ...(missing.length > 0 ? [`has no q ${missing.join(' and ')} tables`] : []),
    ...(older.length > 0 ? [`has older q ${older.join(' and ')} tables (migrations pending)`] : []),
  ].join(' and ');
  throw new QError(
    QErrorCode.SCHEMA_MISMATCH,
    `${opts.command}: ${where} ${what}; nothing was changed. Pass --migrate to create or upgrade them there ` +
      '(or point --dsn at the database a dispatcher runs on: `q-dispatcher run` migrates its own)',
  );
}

/**
 * Opens a small store on `dsn` without migrating, checks its request tables with
 * {@link requireTables}, runs `fn` and closes it.
 */
export async function withExistingStore<T>(
  dsn: string,
  opts: { command: string; migrate: boolean; pooler?: 'transaction'; schema?: string },
  fn: (s: RequestStore) => Promise<T>,
): Promise<T> {
  const placement = { ...(opts.pooler ? { pooler: opts.pooler } : {}), ...(opts.schema !== undefined ? { schema: opts.schema } : {}) };
  const store = await RequestStore.open(dsn, { ...placement, maxConns: 2, applicationName: 'q-dispatcher-cli', migrate: false });
  try {
    await requireTables(store, ['requests'], opts);
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** Opens `dsn` without migrating and runs {@link requireTables} for `modules` on it. */
export async function checkDatabase(dsn: string, modules: MigrationModule[], opts: { command: string; migrate: boolean }): Promise<void> {
  const store = await RequestStore.open(dsn, { maxConns: 1, applicationName: 'q-dispatcher-cli', migrate: false });
  try {
    await requireTables(store, modules, opts);
  } finally {
    await store.close();
  }
}
