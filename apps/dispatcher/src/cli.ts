#!/usr/bin/env node
// q-dispatcher: placeholder entry point until the dispatcher lands (issue 8). `demo` starts the
// embedded Postgres kept under .q/, migrates every q module and prints the tables it made.
import path from 'node:path';
import { startEmbeddedPostgres } from '@q/devdb';
import { migrate } from '@q/schema';
import pg from 'pg';

async function demo(): Promise<void> {
  const server = await startEmbeddedPostgres({ dataDir: path.resolve('.q', 'pgdata') });
  const pool = new pg.Pool({ connectionString: server.dsn, max: 2 });
  try {
    await migrate(pool, { modules: ['requests', 'quota', 'jobs'] });
    const { rows } = await pool.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`,
    );
    console.log(`embedded Postgres at ${server.dsn}; q schema:`);
    for (const r of rows) console.log(`  ${r.table_name}`);
  } finally {
    await pool.end();
    await server.stop();
  }
}

const [cmd] = process.argv.slice(2);
if (cmd === 'demo') await demo();
else {
  console.error('usage: q-dispatcher demo');
  process.exitCode = 2;
}
