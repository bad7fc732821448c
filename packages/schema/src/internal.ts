// `@q/schema/internal`: helpers q's own packages share (statement scopes and the statement helper,
// array literals and row helpers, option and name checks, pool defaults, server checks, the
// failure tracker and the loops' failure watch). Not covered by semver: any of these may change or
// go in any release. Applications use the root entry `@q/schema`. `test/entries.test.ts` pins this
// list too.
export { redactDsnString } from './dsn.js';
export { databaseError, type DatabaseErrorOptions } from './db-error.js';
export { bundledBaseline, type MigrationBaseline } from './migrations.js';
export { DEFAULT_IDLE_TIMEOUT_MS, connectionError, resolveIdleTimeout, resolveMaxConns, withTransaction } from './pool.js';
export { MAX_NAME_BYTES, checkName, checkText, unstorableText } from './text.js';
export {
  MAX_SCHEMA_BYTES,
  SCHEMA_TOKEN,
  StatementScope,
  checkSchemaName,
  quoteIdent,
  statement,
  type Statement,
  type StatementOptions,
  type StatementScopeOptions,
} from './statement.js';
export { repeatedTimestamps } from './timestamps.js';
export { at, onlyRow, plainArrayLiteral, textArrayLiteral, unnestColumn } from './arrays.js';
export { DEFAULT_MAX_PERSISTENT_FAILURES, FailureTracker, type FailureTrackerOptions } from './failure.js';
export { FailureWatch, type FailureWatchOptions, type LoopFailure } from './failure-watch.js';
export { checkPlacement, namedStatements } from './placement.js';
export { LOGGER_METHODS, checkOptionalFunction, checkOptionalMethods, checkOptionsObject, checkProviders } from './option-shapes.js';
export {
  MIN_SERVER_VERSION_NUM,
  checkResolvedSchema,
  checkSchemaGrants,
  checkServerVersion,
  readSession,
  requestedSearchPath,
  searchPathEntries,
  type SessionFacts,
} from './schema-check.js';
