import type pg from 'pg';

/**
 * Runs `fn` in a transaction on one connection of `pool` — the way an application calls q inside its
 * own transaction — and ends it with `end` (COMMIT unless told ROLLBACK). If `fn` throws, the
 * transaction is rolled back before the connection goes back to the pool.
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>, end: 'COMMIT' | 'ROLLBACK' = 'COMMIT'): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    const out = await fn(c);
    await c.query(end);
    return out;
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    c.release();
  }
}
