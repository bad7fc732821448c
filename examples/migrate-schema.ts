// README example: create q's tables in a schema of your database and list what was created.
//   DATABASE_URL=postgres://… npx tsx examples/migrate-schema.ts
import { migrate } from '@q/schema';
import pg from 'pg';

export async function main(dsn = process.env.DATABASE_URL): Promise<string[]> {
  if (!dsn) throw new Error('set DATABASE_URL');
  const pool = new pg.Pool({ connectionString: dsn });
  try {
    await migrate(pool, { modules: ['requests', 'quota', 'jobs'] });
    const { rows } = await pool.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`,
    );
    return rows.map((r) => r.table_name);
  } finally {
    await pool.end();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log((await main()).join('\n'));
}
