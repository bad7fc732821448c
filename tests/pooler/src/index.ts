export { findPgBouncer, startPgBouncer, type PgBouncer, type PgBouncerOptions, type PoolerUser } from './pgbouncer.js';
