import type { FromPoolOptions, OpenOptions } from '../options.js';

/** What {@link JobStoreOpenOptions} and {@link JobStoreFromPoolOptions} add for the job store. */
export interface JobStoreSchemaOptions {
  /**
   * The schema holding the job table: created if missing and migrated into (unless `migrate` is
   * false), and named in every statement, so the connections' `search_path` does not matter.
   * Absent: the connection's `current_schema()` at open.
   */
  schema?: string;
  /**
   * `'transaction'` behind a transaction-mode pooler (PgBouncer without prepared-statement
   * tracking): statements are sent unnamed (parsed on every call). Absent: named statements.
   */
  pooler?: 'transaction';
}

/** Options of `JobStore.open`. */
export interface JobStoreOpenOptions extends OpenOptions, JobStoreSchemaOptions {}

/** Options of `JobStore.fromPool`. */
export interface JobStoreFromPoolOptions extends FromPoolOptions, JobStoreSchemaOptions {}
