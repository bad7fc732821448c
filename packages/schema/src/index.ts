export * from './errors.js';
export * from './dsn.js';
export * from './db-error.js';
export * from './migrations.js';
export * from './migrate.js';
export * from './pool.js';
export * from './text.js';
export * from './tables.js';
