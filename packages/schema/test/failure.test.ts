import { createTestSchema, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QError, classifyFailure } from '../src/index.js';
import { FailureTracker, databaseError } from '../src/internal.js';

let s: TestSchema;
beforeAll(async () => {
  s = await createTestSchema('fail');
});
afterAll(async () => {
  await s.drop();
});

/** The error Postgres raises for `sql` (a real server error, not a constructed one). */
async function serverError(sql: string, setup?: string): Promise<unknown> {
  const c = new pg.Client({ connectionString: s.dsn });
  await c.connect();
  try {
    if (setup) await c.query(setup);
    await c.query(sql);
    throw new Error(`expected ${sql} to fail`);
  } catch (err) {
    return err;
  } finally {
    await c.end();
  }
}

describe('classifyFailure', () => {
  it('sorts real server errors: read-only, undefined table/function, prepared statements are persistent', async () => {
    const readOnly = await serverError('CREATE TABLE ro_t (x int)', 'SET default_transaction_read_only = on');
    expect(classifyFailure(readOnly)).toMatchObject({ kind: 'persistent', sqlState: '25006' });
    expect(classifyFailure(await serverError('SELECT * FROM no_such_table'))).toMatchObject({ kind: 'persistent', sqlState: '42P01' });
    expect(classifyFailure(await serverError('SELECT no_such_fn()'))).toMatchObject({ kind: 'persistent', sqlState: '42883' });
    expect(classifyFailure(await serverError('EXECUTE q_missing'))).toMatchObject({ kind: 'persistent', sqlState: '26000' });
    expect(classifyFailure(await serverError('PREPARE p AS SELECT 1', 'PREPARE p AS SELECT 1'))).toMatchObject({
      kind: 'persistent',
      sqlState: '42P05',
    });
    // Wrapped as the stores wrap it: the SQLSTATE is found on the cause.
    expect(classifyFailure(databaseError('claim', readOnly))).toMatchObject({ kind: 'persistent', sqlState: '25006' });
  });

  it('permission denied (42501) is persistent; a serialization failure, a terminated backend and a refused socket are transient', async () => {
    const admin = new pg.Client({ connectionString: s.serverDsn });
    await admin.connect();
    const role = `${s.name}_ro`;
    await admin.query(`CREATE ROLE "${role}" LOGIN`);
    await admin.query(`CREATE TABLE "${s.name}".guarded (x int)`);
    try {
      const u = new URL(s.dsn);
      u.username = role;
      const c = new pg.Client({ connectionString: u.toString() });
      await c.connect();
      const denied = await c.query(`SELECT * FROM "${s.name}".guarded`).then(
        () => undefined,
        (e: unknown) => e,
      );
      await c.end();
      expect(classifyFailure(denied)).toMatchObject({ kind: 'persistent', sqlState: '42501' });
    } finally {
      await admin.query(`DROP TABLE "${s.name}".guarded`);
      await admin.query(`DROP ROLE "${role}"`);
      await admin.end();
    }
    const victim = new pg.Client({ connectionString: s.dsn });
    victim.on('error', () => undefined);
    await victim.connect();
    const pid = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const killer = new pg.Client({ connectionString: s.dsn });
    await killer.connect();
    const waiting = victim.query('SELECT pg_sleep(10)').then(
      () => undefined,
      (e: unknown) => e,
    );
    await new Promise((r) => setTimeout(r, 200));
    await killer.query('SELECT pg_terminate_backend($1)', [pid]);
    await killer.end();
    expect(classifyFailure(await waiting)).toMatchObject({ kind: 'transient', sqlState: '57P01' });
    expect(classifyFailure(Object.assign(new Error('x'), { code: '40001' }))).toMatchObject({ kind: 'transient' });
    expect(classifyFailure(Object.assign(new Error('x'), { code: '53300' }))).toMatchObject({ kind: 'transient' });
    const refused = await new pg.Client({ connectionString: 'postgres://x@127.0.0.1:1/x' }).connect().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(classifyFailure(refused)).toMatchObject({ kind: 'transient' });
    expect(classifyFailure(new Error('Connection terminated unexpectedly'))).toMatchObject({ kind: 'transient' });
  });
});

describe('FailureTracker', () => {
  it('stops after N identical persistent failures; a success or a different failure starts a new run; transient never stops', () => {
    const t = new FailureTracker({ maxPersistent: 3 });
    const ro = Object.assign(new Error('ro'), { code: '25006' });
    expect(t.observe(ro)).toMatchObject({ count: 1, first: true, stop: false });
    expect(t.observe(ro)).toMatchObject({ count: 2, first: false, stop: false });
    t.success();
    expect(t.observe(ro)).toMatchObject({ count: 1, stop: false });
    expect(t.observe(new QError('CONNECTION', 'x', { cause: Object.assign(new Error('d'), { code: '42501' }) }))).toMatchObject({ count: 1 });
    expect(t.observe(ro)).toMatchObject({ count: 1 });
    expect(t.observe(ro)).toMatchObject({ count: 2 });
    expect(t.observe(ro)).toMatchObject({ count: 3, stop: true });
    const flaky = Object.assign(new Error('gone'), { code: '57P01' });
    for (let i = 0; i < 10; i++) expect(t.observe(flaky).stop).toBe(false);
    expect(() => new FailureTracker({ maxPersistent: 0 })).toThrow(RangeError);
  });
});
