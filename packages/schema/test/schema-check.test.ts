import { createTestSchema, type TestSchema, thrownBy } from '@q/testing';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { QError, migrate } from '../src/index.js';
import { MIN_SERVER_VERSION_NUM, checkServerVersion, readSession, requestedSearchPath, searchPathEntries } from '../src/internal.js';

const schemas: TestSchema[] = [];
const pools: pg.Pool[] = [];
const cleanup: string[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.end()));
  for (const s of schemas.splice(0)) {
    const admin = new pg.Client({ connectionString: s.serverDsn });
    await admin.connect();
    for (const q of cleanup.splice(0)) await admin.query(q);
    await admin.end();
    await s.drop();
  }
});

async function fresh(): Promise<TestSchema> {
  const s = await createTestSchema('chk');
  schemas.push(s);
  return s;
}

function pool(config: pg.PoolConfig): pg.Pool {
  const p = new pg.Pool({ max: 2, ...config });
  pools.push(p);
  return p;
}

async function tableCount(admin: pg.Pool, schema: string): Promise<number> {
  const { rows } = await admin.query<{ n: string }>('SELECT count(*) AS n FROM pg_tables WHERE schemaname = $1', [schema]);
  return Number(rows[0]!.n);
}

/** A login role that can connect; dropped after the test. */
async function role(s: TestSchema, admin: pg.Pool, suffix: string): Promise<string> {
  const name = `${s.name}_${suffix}`;
  await admin.query(`CREATE ROLE "${name}" LOGIN`);
  cleanup.push(`DROP OWNED BY "${name}" CASCADE`, `DROP ROLE IF EXISTS "${name}"`);
  return name;
}

function dsnAs(dsn: string, user: string): string {
  const u = new URL(dsn);
  u.username = user;
  u.password = '';
  return u.toString();
}

async function rejection(p: Promise<unknown>): Promise<QError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(QError);
  return err as QError;
}

describe('supported versions', () => {
  it('checkServerVersion refuses 12 and older with CONFIG naming both versions, accepts 13 and later', () => {
    expect(MIN_SERVER_VERSION_NUM).toBe(130_000);
    for (const [n, text] of [
      [120_017, '12.17'],
      [129_999, '12.9999'],
      [90_624, '9.6.24'],
    ] as const) {
      const err = thrownBy(() => checkServerVersion(n));
      expect(err).toBeInstanceOf(QError);
      expect((err as QError).code).toBe('CONFIG');
      expect((err as QError).message).toContain(`PostgreSQL ${text} is not supported`);
      expect((err as QError).message).toContain('13 or later');
    }
    for (const n of [130_000, 130_016, 150_004, 180_000]) expect(() => checkServerVersion(n)).not.toThrow();
    expect(() => checkServerVersion(Number.NaN)).toThrow(/cannot read the server version/);
  });

  it('migrate reads server_version_num from the real server and runs on it (13 or later)', async () => {
    const s = await fresh();
    const p = pool({ connectionString: s.dsn });
    const client = await p.connect();
    const facts = await readSession(client).finally(() => client.release());
    expect(facts.versionNum).toBeGreaterThanOrEqual(130_000);
    expect(() => checkServerVersion(facts.versionNum)).not.toThrow();
    expect(facts.currentSchema).toBe(s.name);
    await migrate(p, { modules: ['jobs'] });
  });
});

describe('schema checks name the real cause', () => {
  it('parses search_path settings and the DSN options search_path', () => {
    expect(searchPathEntries('"$user", public')).toEqual(['$user', 'public']);
    expect(searchPathEntries('nope,Public')).toEqual(['nope', 'public']);
    expect(searchPathEntries('"My ""S""", b')).toEqual(['My "S"', 'b']);
    expect(requestedSearchPath(new pg.Pool({ connectionString: 'postgres://u@h/d?options=-c%20search_path%3Dapp' }))).toBe('app');
    expect(requestedSearchPath(new pg.Pool({ options: '-c search_path=app,public' }))).toBe('app,public');
    expect(requestedSearchPath(new pg.Pool({ connectionString: 'postgres://u@h/d' }))).toBeUndefined();
  });

  it('search_path = nope,<schema> is refused naming "nope" instead of migrating silently into the next schema', async () => {
    const s = await fresh();
    const admin = pool({ connectionString: s.serverDsn });
    const p = pool({ connectionString: s.serverDsn, options: `-c search_path=nope_${s.name},${s.name}` });
    const err = await rejection(migrate(p, { modules: ['jobs'] }));
    expect(err.code).toBe('SCHEMA_MISMATCH');
    expect(err.message).toContain(`"nope_${s.name}", does not exist`);
    expect(err.message).toContain(`resolved to "${s.name}"`);
    expect(await tableCount(admin, s.name)).toBe(0);
  });

  it('a first search_path schema without USAGE is refused naming the missing USAGE (not "does not exist")', async () => {
    const s = await fresh();
    const admin = pool({ connectionString: s.serverDsn });
    const user = await role(s, admin, 'nousage');
    await admin.query(`GRANT CREATE ON SCHEMA "${s.name}" TO "${user}"`);
    const p = pool({ connectionString: dsnAs(s.dsn, user) });
    const err = await rejection(migrate(p, { modules: ['jobs'] }));
    expect(err.code).toBe('SCHEMA_MISMATCH');
    expect(err.message).toContain(`no USAGE on schema "${s.name}"`);
    expect(await tableCount(admin, s.name)).toBe(0);
  });

  it('the schema option on a schema without USAGE, or without CREATE while migrations are pending, names the grant', async () => {
    const s = await fresh();
    const admin = pool({ connectionString: s.serverDsn });
    const user = await role(s, admin, 'grants');
    const p = pool({ connectionString: dsnAs(s.serverDsn, user) });
    const noUsage = await rejection(migrate(p, { modules: ['jobs'], schema: s.name }));
    expect(noUsage.code).toBe('SCHEMA_MISMATCH');
    expect(noUsage.message).toContain(`no USAGE on schema "${s.name}"`);
    await admin.query(`GRANT USAGE ON SCHEMA "${s.name}" TO "${user}"`);
    const noCreate = await rejection(migrate(p, { modules: ['jobs'], schema: s.name }));
    expect(noCreate.code).toBe('SCHEMA_MISMATCH');
    expect(noCreate.message).toContain(`no CREATE on schema "${s.name}"`);
    // Once migrated by an owner, a DML-only role (reads the journal) passes the check: nothing pending.
    await migrate(admin, { modules: ['jobs'], schema: s.name });
    await admin.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${s.name}" TO "${user}"`);
    await migrate(p, { modules: ['jobs'], schema: s.name });
  });

  it('a DSN search_path the session does not have (a pooler dropped the startup option) is refused naming it', async () => {
    const s = await fresh();
    const admin = pool({ connectionString: s.serverDsn });
    const p = pool({ connectionString: s.dsn });
    // What a pooler that drops `options` leaves: a session on the server's default search_path.
    p.on('connect', (c) => void c.query(`SET search_path TO "$user", public`));
    const err = await rejection(migrate(p, { modules: ['jobs'] }));
    expect(err.code).toBe('SCHEMA_MISMATCH');
    expect(err.message).toContain(`asked for search_path "${s.name}"`);
    expect(err.message).toContain('a pooler dropped the startup option');
    expect(await tableCount(admin, s.name)).toBe(0);
  });
});
