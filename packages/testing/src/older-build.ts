import type pg from 'pg';

/** One shipped migration, as `bundledMigrations()` of `@q/schema` lists it. */
export interface ShippedMigration {
  module: string;
  tag: string;
  hash: string;
  statements: readonly string[];
}

const quote = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/**
 * Leaves `schema` as an older build's `migrate()` would have: `migrations` (e.g. the shipped ones
 * before a tag) applied in one transaction and recorded in `journalTable`, so an upgrade test
 * can write rows in the old shape and then run the current `migrate()` over them.
 */
export async function migrateAsOlderBuild(
  pool: pg.Pool,
  schema: string,
  migrations: readonly ShippedMigration[],
  journalTable: string,
): Promise<void> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query(`CREATE SCHEMA IF NOT EXISTS ${quote(schema)}`);
    await c.query(`SET LOCAL search_path TO ${quote(schema)}`);
    await c.query(`CREATE TABLE IF NOT EXISTS ${journalTable} (module text NOT NULL, tag text NOT NULL, hash text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (module, tag))`);
    for (const m of migrations) {
      for (const s of m.statements) await c.query(s);
      await c.query(`INSERT INTO ${journalTable} (module, tag, hash) VALUES ($1, $2, $3)`, [m.module, m.tag, m.hash]);
    }
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    c.release();
  }
}
