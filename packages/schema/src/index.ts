export * from './errors.js';
export * from './dsn.js';
export * from './db-error.js';
export * from './migrations.js';
export * from './migrate.js';
export * from './installed.js';
export * from './pool.js';
export * from './text.js';
export * from './statement.js';
export * from './timestamps.js';
export * from './arrays.js';
// The Drizzle table objects moved to `@q/schema/tables`: re-exporting them here would load drizzle-orm
// for every runtime user of q. Deprecated: import `asyncRequests`, `jobs`, … from `@q/schema/tables`.
export * from './failure.js';
export * from './placement.js';
export * from './option-shapes.js';
export * from './schema-check.js';
