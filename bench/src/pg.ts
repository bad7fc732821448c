import pg from 'pg';

/**
 * Where an idle connection's error goes. A run's database is dropped `WITH (FORCE)` after the run,
 * which terminates any backend still attached: a `pg` pool or client without an `'error'` listener
 * turns that into an uncaught exception that kills the whole benchmark. The harness waits for a
 * run's connections to close before it drops the database (and reports any left open), so in a
 * clean run this is never called.
 */
function idleError(owner: string) {
  return (err: Error) => process.stderr.write(`bench: ${owner}: connection lost while idle: ${err.message}\n`);
}

/** A `pg.Pool` of the benchmark itself (probes, raw-SQL systems): it always handles `'error'`. */
export function benchPool(dsn: string, max: number, owner: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: dsn, max });
  pool.on('error', idleError(owner));
  return pool;
}

/** A `pg.Client` of the benchmark itself: it always handles `'error'`. */
export function benchClient(dsn: string, owner: string): pg.Client {
  const client = new pg.Client({ connectionString: dsn });
  client.on('error', idleError(owner));
  return client;
}

/**
 * Runs every closer, even after one failed, so one broken `close()` does not leave the others'
 * connections open; rethrows the first failure.
 */
export async function closeAll(...closers: Array<(() => unknown) | undefined>): Promise<void> {
  let first: { err: unknown } | undefined;
  for (const close of closers) {
    if (!close) continue;
    try {
      await close();
    } catch (err) {
      first ??= { err };
    }
  }
  if (first) throw first.err;
}
