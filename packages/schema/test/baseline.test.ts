// A fresh schema is migrated from each module's baseline script (drizzle/<module>/baseline.sql)
// instead of replaying the migrations that created, then renamed, the old unprefixed objects. The
// baseline must leave exactly what the migrations leave, and a fresh install must not trip over
// an application's own `jobs` table.
import { createTestSchema, migrateAsOlderBuild, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOURNAL_TABLE, bundledMigrations, migrate, type MigrationModule } from '../src/index.js';
import { bundledBaseline, quoteIdent } from '../src/internal.js';

let base: TestSchema;
let admin: pg.Pool;
const made: string[] = [];

beforeAll(async () => {
  base = await createTestSchema('bl');
  admin = new pg.Pool({ connectionString: base.serverDsn, max: 2 });
});
afterAll(async () => {
  for (const s of made) await admin.query(`DROP SCHEMA IF EXISTS ${quoteIdent(s)} CASCADE`);
  await admin.end();
  await base.drop();
});

function schemaName(suffix: string): string {
  const s = `${base.name}_${suffix}`;
  made.push(s);
  return s;
}

/** Everything a migration can create in `schema`, as text with the schema name taken out. */
async function catalog(schema: string): Promise<Record<string, string[]>> {
  const q = async (sql: string): Promise<string[]> =>
    (await admin.query<{ x: string }>(sql, [schema])).rows.map((r) => r.x.split(schema).join('S')).sort();
  return {
    columns: await q(`SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull
        || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') || ' ' || a.attidentity::text AS x
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
      WHERE n.nspname = $1 AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p') AND c.relname <> '${JOURNAL_TABLE}'`),
    relations: await q(`SELECT c.relname || ' ' || c.relkind::text || ' ' || coalesce(array_to_string(c.reloptions, ','), '') AS x
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname NOT LIKE '${JOURNAL_TABLE}%'`),
    indexes: await q(`SELECT indexdef AS x FROM pg_indexes WHERE schemaname = $1 AND tablename <> '${JOURNAL_TABLE}'`),
    // NOT NULL is compared through attnotnull above: PostgreSQL 18 also records it as a constraint
    // named after the table it was created on, which a later rename keeps.
    constraints: await q(`SELECT conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(c.oid) AS x
      FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
      WHERE n.nspname = $1 AND c.contype <> 'n' AND conrelid::regclass::text NOT LIKE '%${JOURNAL_TABLE}'`),
    functions: await q(`SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') ' || pg_get_function_result(p.oid)
        || ' ' || p.provolatile::text || ' ' || coalesce(array_to_string(p.proconfig, ','), '') || ' ' || md5(p.prosrc) AS x
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`),
    types:
      await q(`SELECT t.typname || ' ' || coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid), '') AS x
      FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = $1 AND t.typtype IN ('e', 'd')`),
    sequences: await q(
      `SELECT sequencename || ' ' || data_type || ' ' || increment_by || ' ' || cache_size AS x FROM pg_sequences WHERE schemaname = $1`,
    ),
  };
}

describe('migration baselines', () => {
  for (const module of ['jobs', 'requests', 'quota'] as MigrationModule[]) {
    it(`${module}: the baseline leaves the same objects as every migration run one by one, and journals them all`, async () => {
      // A baseline may stand for fewer migrations than are shipped: the later ones run after it.
      expect(bundledMigrations(module).map((m) => m.tag)).toContain(bundledBaseline(module)?.through);
      const stepped = schemaName(`${module}_steps`);
      await migrateAsOlderBuild(admin, stepped, bundledMigrations(module), { quoteIdent, journalTable: JOURNAL_TABLE });
      const fresh = schemaName(`${module}_base`);
      await migrate(admin, { modules: [module], schema: fresh });
      const [a, b] = [await catalog(stepped), await catalog(fresh)];
      expect(b.relations?.length).toBeGreaterThan(1);
      expect(b).toEqual(a);
      const journal = await admin.query<{ tag: string; hash: string }>(
        `SELECT tag, hash FROM ${quoteIdent(fresh)}.${JOURNAL_TABLE} WHERE module = $1 ORDER BY tag`,
        [module],
      );
      expect(journal.rows).toEqual(bundledMigrations(module).map((m) => ({ tag: m.tag, hash: m.hash })));
      // Migrating again is a no-op; an existing schema keeps the step-by-step path.
      await migrate(admin, { modules: [module], schema: fresh });
      await migrate(admin, { modules: [module], schema: stepped });
      expect(await catalog(stepped)).toEqual(a);
    });
  }

  it("a fresh install into a schema that already has the application's own jobs table leaves that table alone", async () => {
    const app = schemaName('app');
    await admin.query(`CREATE SCHEMA ${quoteIdent(app)}`);
    await admin.query(`CREATE TABLE ${quoteIdent(app)}.jobs (id bigserial PRIMARY KEY, title text NOT NULL)`);
    await admin.query(`INSERT INTO ${quoteIdent(app)}.jobs (title) VALUES ('keep me')`);
    await migrate(admin, { modules: ['requests', 'quota', 'jobs'], schema: app });
    const mine = await admin.query<{ title: string }>(`SELECT title FROM ${quoteIdent(app)}.jobs`);
    expect(mine.rows).toEqual([{ title: 'keep me' }]);
    const q = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${quoteIdent(app)}.q_jobs_all`);
    expect(q.rows[0]?.n).toBe(0);
  });
});
