import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { testDatabaseUrl, withClient } from './client.js';

/** A fresh, empty schema of the test database, private to one test file. */
export interface TestSchema {
  /** Schema name, e.g. `t_3f9a…`. */
  readonly name: string;
  /** DSN whose connections use this schema (`search_path`). Pass it to `RequestStore.open` etc. */
  readonly dsn: string;
  /** DSN of the server without the schema option (for admin work). */
  readonly serverDsn: string;
  /** A pool on this schema, created on first use and closed by `drop()`. */
  pool(): pg.Pool;
  /** Drops the schema and closes the pool. */
  drop(): Promise<void>;
}

/** Returns `dsn` with `search_path` set to `schema` through the startup `options`. */
export function dsnWithSchema(dsn: string, schema: string): string {
  const u = new URL(dsn);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return u.toString();
}

/**
 * Creates a schema no other test file sees. Call in `beforeAll` (or at the top of a file) and
 * `drop()` in `afterAll`.
 */
export async function createTestSchema(prefix = 't'): Promise<TestSchema> {
  const serverDsn = testDatabaseUrl();
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  // A client of its own, whose errors are ignored: a test may terminate backends or restart the server.
  await withClient(serverDsn, (admin) => admin.query(`CREATE SCHEMA "${name}"`));
  const dsn = dsnWithSchema(serverDsn, name);
  let pool: pg.Pool | undefined;
  return {
    name,
    dsn,
    serverDsn,
    pool() {
      if (!pool) {
        pool = new pg.Pool({ connectionString: dsn, max: 8 });
        pool.on('error', () => undefined); // a test may terminate backends on purpose
      }
      return pool;
    },
    async drop() {
      await pool?.end().catch(() => undefined);
      pool = undefined;
      await withClient(serverDsn, (c) => c.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`));
    },
  };
}
