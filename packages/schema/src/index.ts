// `@q/schema`: what applications use — `migrate()` and the migration journal, `QError` and its codes,
// the DSN and pool helpers, the failure classifier and the connection options every store takes.
// The helpers q's own packages share (statement scopes, array literals, option checks, …) live in
// `@q/schema/internal`, which semver does not cover. `test/entries.test.ts` pins this list.
export { QError, QErrorCode, QuotaHolderLapsedError, invalidArgument, isQError } from './errors.js';
export { redactDsn, redactSecretsOf, validateDsn } from './dsn.js';
export { MIGRATION_MODULES, bundledMigrations, type BundledMigration, type MigrationModule } from './migrations.js';
export { JOURNAL_TABLE, migrate, type MigrateOptions } from './migrate.js';
export { installedModules, migrationStatus, type InstalledOptions, type ModuleMigrationStatus } from './installed.js';
export { DEFAULT_MAX_CONNS, openPool, type PoolOptions } from './pool.js';
// The Drizzle table objects moved to `@q/schema/tables`: re-exporting them here would load drizzle-orm
// for every runtime user of q. Deprecated: import `asyncRequests`, `jobs`, … from `@q/schema/tables`.
export { type Queryable } from './statement.js';
export { classifyFailure, type FailureClass, type FailureKind, type FailureVerdict } from './failure.js';
export { type ConnectionPlacement, type StoreConnectionOptions, type StoreOpenOptions } from './placement.js';
