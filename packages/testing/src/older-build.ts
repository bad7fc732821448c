import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll } from 'vitest';
import { onOneConnection } from './client.js';
import { testDatabaseUrl } from './client.js';
import { dsnWithSchema } from './schema.js';

/** One shipped migration, as `bundledMigrations()` of `@q/schema` lists it. */
export interface ShippedMigration {
  module: string;
  tag: string;
  hash: string;
  statements: readonly string[];
}

/**
 * What the kit needs of `@q/schema`'s naming, passed in by the caller as `{ quoteIdent, journalTable:
 * JOURNAL_TABLE }` from `@q/schema`: the kit cannot import it (`@q/schema`'s own tests use the kit, so the
 * dependency would be a cycle), and a copy of the quoting rule here could drift from the one q uses.
 */
export interface SchemaNaming {
  /** Quotes an SQL identifier (`quoteIdent` of `@q/schema`). */
  quoteIdent(name: string): string;
  /** The migration journal's table name (`JOURNAL_TABLE` of `@q/schema`). */
  journalTable: string;
}

/**
 * Leaves `schema` as an older build's `migrate()` would have: `migrations` (e.g. the shipped ones
 * before a tag) applied in one transaction and recorded in the journal table, so an upgrade test
 * can write rows in the old shape and then run the current `migrate()` over them.
 */
export async function migrateAsOlderBuild(
  pool: pg.Pool,
  schema: string,
  migrations: readonly ShippedMigration[],
  naming: SchemaNaming,
): Promise<void> {
  const { quoteIdent, journalTable } = naming;
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
    await c.query(`SET LOCAL search_path TO ${quoteIdent(schema)}`);
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

/** Schemas a test file names itself (placement and upgrade tests), with an admin pool on the server. */
export interface ScratchSchemas {
  /** A pool on the test server without a schema option (2 connections). */
  readonly admin: pg.Pool;
  /** A fresh schema name `<prefix>_<random>`; the schema (if created) is dropped in `afterAll`. */
  name(prefix: string): string;
  /**
   * A created, empty schema `<prefix>decoy_<random>`, a target schema name `<prefix>target_<random>`
   * (not created), and a DSN whose search_path is the decoy: for tests that a store given
   * `schema: target` puts everything in the target whatever its connections' search_path says.
   */
  decoyAndTarget(prefix: string): Promise<{ decoy: string; target: string; dsn: string }>;
  /**
   * Opens a store in schema `<prefix>a_<random>` and one in `<prefix>b_<random>` with `open`, both on
   * one pool of a single connection ({@link onOneConnection}), runs `fn` with them, then closes both
   * and the pool: for tests that stores of different schemas sharing one server session do not mix.
   */
  twoSchemasOnOneConnection<S extends { close(): Promise<void> }>(
    prefix: string,
    open: (pool: pg.Pool, schema: string) => Promise<S>,
    fn: (a: S, b: S) => Promise<void>,
  ): Promise<void>;
  /** How many tables each of `schemas` holds (the journal included), by schema name; schemas with none are absent. */
  tableCounts(schemas: readonly string[]): Promise<Array<{ schema: string; n: number }>>;
  /**
   * A fresh schema `<prefix>_<random>` left by {@link migrateAsOlderBuild} (on the admin pool) of the
   * `migrations` whose tag sorts before `beforeTag` (all without it): its name, its name quoted for
   * SQL, and a DSN whose search_path is it (for the current build's `open`).
   */
  olderBuild(
    prefix: string,
    migrations: readonly ShippedMigration[],
    beforeTag?: string,
  ): Promise<{ schema: string; quoted: string; dsn: string }>;
}

/**
 * Registers an `afterAll` that drops every schema {@link ScratchSchemas.name} handed out, then
 * closes the admin pool. For files that create schemas through the code under test (`migrate`'s
 * `schema` option) rather than with `createTestSchema()`.
 */
export function useScratchSchemas(naming: SchemaNaming): ScratchSchemas {
  const admin = new pg.Pool({ connectionString: testDatabaseUrl(), max: 2 });
  admin.on('error', () => undefined); // a test may terminate backends on purpose
  const made: string[] = [];
  afterAll(async () => {
    for (const s of made) await admin.query(`DROP SCHEMA IF EXISTS ${naming.quoteIdent(s)} CASCADE`);
    await admin.end();
  });
  const name = (prefix: string): string => {
    const n = `${prefix}_${randomBytes(5).toString('hex')}`;
    made.push(n);
    return n;
  };
  return {
    admin,
    name,
    async decoyAndTarget(prefix) {
      const decoy = name(`${prefix}decoy`);
      const target = name(`${prefix}target`);
      await admin.query(`CREATE SCHEMA ${naming.quoteIdent(decoy)}`);
      return { decoy, target, dsn: dsnWithSchema(testDatabaseUrl(), decoy) };
    },
    twoSchemasOnOneConnection: (prefix, open, fn) =>
      onOneConnection(async (pool) => {
        const a = await open(pool, name(`${prefix}a`));
        const b = await open(pool, name(`${prefix}b`));
        try {
          await fn(a, b);
        } finally {
          await a.close();
          await b.close();
        }
      }),
    async tableCounts(schemas) {
      const { rows } = await admin.query<{ schema: string; n: number }>(
        `SELECT table_schema AS schema, count(*)::int AS n FROM information_schema.tables
          WHERE table_schema = ANY($1::text[]) GROUP BY 1 ORDER BY 1`,
        [schemas],
      );
      return rows;
    },
    async olderBuild(prefix, migrations, beforeTag) {
      const schema = name(prefix);
      const older = migrations.filter((m) => beforeTag === undefined || m.tag < beforeTag);
      await migrateAsOlderBuild(admin, schema, older, naming);
      return { schema, quoted: naming.quoteIdent(schema), dsn: dsnWithSchema(testDatabaseUrl(), schema) };
    },
  };
}
