import pg from 'pg';

/** The test server's URL: set by the vitest globalSetup (inherited by workers and child processes). */
export function testDatabaseUrl(): string {
  const url = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL;
  if (!url) throw new Error('no test database: run under vitest with @q/testing globalSetup, or set TEST_DATABASE_URL');
  return url;
}

/**
 * Runs `fn` on a dedicated `pg.Client` connected to `dsn` — a session of its own, outside every
 * pool (another search_path, a caller's own connection) — and ends the client however `fn` ends.
 * Errors the client emits later (a test terminating backends) are ignored.
 */
export async function withClient<T>(dsn: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: dsn });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/**
 * Runs `fn` with a pool of a single connection on `dsn` (default: the test server, no schema option)
 * and ends the pool however `fn` ends: every store made on it shares one server session, so what
 * one store leaves on the session (search_path, prepared statements) is what the next one meets.
 */
export async function onOneConnection<T>(fn: (pool: pg.Pool) => Promise<T>, dsn?: string): Promise<T> {
  const pool = new pg.Pool({ connectionString: dsn ?? testDatabaseUrl(), max: 1 });
  try {
    return await fn(pool);
  } finally {
    await pool.end();
  }
}
