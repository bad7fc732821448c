// migrationStatus / installedModules: what q has installed in a schema, from the migration journal.
import { testDatabaseUrl, useSchemaPerTest } from '@q/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { bundledMigrations, installedModules, migrate, migrationStatus } from '../src/index.js';

const { fresh, pools } = useSchemaPerTest('inst', 2);

const tags = (m: 'requests' | 'quota' | 'jobs') => bundledMigrations(m).map((x) => x.tag);

describe('installedModules', () => {
  it('an empty schema has nothing installed, and asking creates nothing', async () => {
    const { schema, pool } = await fresh();
    expect(await installedModules(pool)).toEqual({ requests: false, quota: false, jobs: false });
    const status = await migrationStatus(pool, { modules: ['requests'] });
    expect(status).toEqual([{ module: 'requests', schema: schema.name, applied: [], pending: tags('requests'), installed: false }]);
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1`,
      [schema.name],
    );
    expect(rows[0]!.n).toBe(0);
  });

  it('reports the migrated modules of the current schema, or of the schema named', async () => {
    const { schema, pool } = await fresh();
    await migrate(pool, { modules: ['requests'] });
    expect(await installedModules(pool)).toEqual({ requests: true, quota: false, jobs: false });
    const [req] = await migrationStatus(pool, { modules: ['requests'] });
    expect(req).toEqual({ module: 'requests', schema: schema.name, applied: tags('requests'), pending: [], installed: true });

    // From a connection whose search_path is elsewhere, by name.
    const other = new pg.Pool({ connectionString: testDatabaseUrl(), max: 1 });
    pools.push(other);
    expect(await installedModules(other, { schema: schema.name })).toEqual({ requests: true, quota: false, jobs: false });
    expect(await installedModules(other, { schema: `${schema.name}_missing` })).toEqual({ requests: false, quota: false, jobs: false });
  });

  it('a partly migrated module lists what is pending', async () => {
    const { schema, pool } = await fresh();
    await migrate(pool, { modules: ['quota'] });
    const first = tags('quota')[0]!;
    await pool.query(`DELETE FROM q_schema_migrations WHERE module = 'quota' AND tag <> $1`, [first]);
    const [q] = await migrationStatus(pool, { modules: ['quota'] });
    expect(q).toEqual({ module: 'quota', schema: schema.name, applied: [first], pending: tags('quota').slice(1), installed: true });
  });
});
