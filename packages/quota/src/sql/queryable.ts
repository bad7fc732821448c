export type { Queryable } from '@q/schema';

/** The database clock in milliseconds, as every quota statement reads it. */
export const DB_NOW_MS = '(extract(epoch FROM clock_timestamp()) * 1000)::bigint';
