import pg from 'pg';

/** Terminates every backend whose application_name is `app` (as an operator or a failover would). */
export async function terminateBackends(adminDsn: string, app: string): Promise<number> {
  const c = new pg.Client({ connectionString: adminDsn });
  c.on('error', () => undefined); // a fault scenario may restart the server under it
  await c.connect();
  try {
    const { rows } = await c.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE application_name = $1 AND pid <> pg_backend_pid()) t`,
      [app],
    );
    return rows[0]?.n ?? 0;
  } finally {
    await c.end();
  }
}

/**
 * Opens a transaction that holds a snapshot (pins the vacuum horizon) until `release()`: dead
 * tuples of every table stay unvacuumable meanwhile.
 */
export async function pinVacuumHorizon(dsn: string): Promise<{ release: () => Promise<void> }> {
  const c = new pg.Client({ connectionString: dsn, application_name: 'q-chaos-horizon' });
  // Held across a scenario that may terminate or restart the server: an idle error must not crash.
  c.on('error', () => undefined);
  await c.connect();
  await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await c.query('SELECT txid_current()');
  return {
    async release() {
      await c.query('ROLLBACK').catch(() => undefined);
      await c.end().catch(() => undefined);
    },
  };
}

/** Dead tuples of `table` in the current schema, from the statistics collector. */
export async function deadTuples(dsn: string, table: string): Promise<number> {
  const c = new pg.Client({ connectionString: dsn });
  c.on('error', () => undefined);
  await c.connect();
  try {
    const { rows } = await c.query<{ n: string | null }>(
      `SELECT n_dead_tup AS n FROM pg_stat_user_tables WHERE relname = $1 AND schemaname = current_schema()`,
      [table],
    );
    return Number(rows[0]?.n ?? 0);
  } finally {
    await c.end();
  }
}
