import type pg from 'pg';
import { databaseError } from '@q/schema/internal';
import type { PurgeLock } from './handlers/purge.js';

// A session advisory lock keyed by the schema (advisory locks are database-wide; two q schemas in
// one database purge independently). Session-level, so it lives on one pooled connection for the
// whole run, and a crashed process's lock goes with its connection.
const KEY = `hashtextextended(current_schema() || '/akerdock.purge', 0)`;
const TRY_LOCK = `SELECT pg_try_advisory_lock(${KEY}) AS locked`;
const UNLOCK = `SELECT pg_advisory_unlock(${KEY})`;

/**
 * Keeps `maintenance.purge` runs one at a time across every process on this schema, whatever
 * enqueued them: the schedule `akerdock.purge` gives its jobs no lock key, and a first purge of a
 * large table can outlast the pattern's period. A run that finds the lock held does nothing.
 */
export function advisoryPurgeLock(pool: pg.Pool): PurgeLock {
  return {
    async tryRun<T>(fn: () => Promise<T>) {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (err) {
        throw databaseError('maintenance.purge lock', err);
      }
      let broken: Error | undefined;
      try {
        const { rows } = await client.query<{ locked: boolean }>(TRY_LOCK).catch((err: unknown) => {
          broken = err as Error;
          throw databaseError('maintenance.purge lock', err);
        });
        if (rows[0]?.locked !== true) return { ran: false as const };
        try {
          return { ran: true as const, value: await fn() };
        } finally {
          // A failed unlock leaves the lock on this connection: it is destroyed below, which frees it.
          await client.query(UNLOCK).catch((err: unknown) => {
            broken = err as Error;
          });
        }
      } finally {
        client.release(broken);
      }
    },
  };
}
