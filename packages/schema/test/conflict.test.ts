// A serialization failure is a conflict to retry, not a connection problem (issue 34 item 14).
import { createTestSchema, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { QError, classifyFailure } from '../src/index.js';
import { databaseError } from '../src/internal.js';

let schema: TestSchema;
let pool: pg.Pool;
beforeAll(async () => {
  schema = await createTestSchema('conflict');
  pool = new pg.Pool({ connectionString: schema.dsn, max: 2 });
  await pool.query('CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL)');
  await pool.query('INSERT INTO t VALUES (1, 0)');
});
afterAll(async () => {
  await pool?.end();
  await schema?.drop();
});

/** A real `40001`: two REPEATABLE READ transactions update the same row. */
async function serializationFailure(): Promise<unknown> {
  const a = await pool.connect();
  const b = await pool.connect();
  try {
    await a.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await b.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await a.query('SELECT n FROM t WHERE id = 1');
    await b.query('SELECT n FROM t WHERE id = 1');
    await a.query('UPDATE t SET n = n + 1 WHERE id = 1');
    const blocked = b.query('UPDATE t SET n = n + 1 WHERE id = 1').then(
      () => undefined,
      (err: unknown) => err,
    );
    await a.query('COMMIT');
    return await blocked;
  } finally {
    await b.query('ROLLBACK').catch(() => undefined);
    a.release();
    b.release();
  }
}

it('a serialization failure (40001) is CONFLICT, transient, and says to retry', async () => {
  const raw = await serializationFailure();
  expect((raw as { code?: string }).code).toBe('40001');
  const err = databaseError('complete', raw);
  expect(err).toBeInstanceOf(QError);
  expect(err.code).toBe('CONFLICT');
  expect(err.message).toBe('complete: serialization failure with a concurrent transaction, nothing was done: retry (SQLSTATE 40001)');
  expect(err.cause).toBe(raw);
  expect(classifyFailure(err)).toMatchObject({ kind: 'transient', sqlState: '40001' });
});

it('a deadlock (40P01) is CONFLICT too', () => {
  const raw = Object.assign(new Error('deadlock detected'), { code: '40P01' });
  expect(databaseError('claim', raw)).toMatchObject({
    code: 'CONFLICT',
    message: expect.stringMatching(/^claim: deadlock with a concurrent transaction/),
  });
});
