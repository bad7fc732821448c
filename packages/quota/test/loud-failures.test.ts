// Loud failures (issue 18 item 2): a quota client whose statements fail persistently (read-only
// role, no grants) logs at error level at once, reports through onError, and after a bounded
// number of identical failures stops: every call then rejects with that error.
import { QError } from '@q/schema';
import { createTestSchema, type TestSchema, memoryLogger, testRoles, type TestRoles } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createQuota, type QuotaFailure } from '../src/index.js';

let schema: TestSchema;
let roles: TestRoles;

beforeAll(async () => {
  schema = await createTestSchema('qloud');
  const owner = await createQuota({ dsn: schema.dsn, ttlMs: 5_000 });
  await owner.close();
  roles = testRoles(schema);
});
afterAll(async () => {
  await roles?.drop();
  await schema?.drop();
});

async function expectStops(dsn: string, sqlState: string, reason: RegExp, call: 'acquire' | 'admit'): Promise<void> {
  const logger = memoryLogger();
  const failures: QuotaFailure[] = [];
  const q = await createQuota({ dsn, ttlMs: 5_000, logger, maxPersistentFailures: 3, onError: (f) => failures.push(f), migrate: false });
  try {
    const attempt = () => (call === 'acquire' ? q.acquire('k', 2) : q.admit('k', 2, 60_000));
    const errors: unknown[] = [];
    for (let i = 0; i < 5; i++)
      errors.push(
        await attempt().then(
          () => undefined,
          (e: unknown) => e,
        ),
      );
    expect(errors.every((e) => e instanceof QError)).toBe(true);
    expect(logger.lines.find((l) => l.level === 'error')?.fields).toMatchObject({ kind: 'persistent', sqlstate: sqlState, count: 1 });
    expect(failures.filter((f) => f.fatal)).toHaveLength(1);
    expect(failures.find((f) => f.fatal)?.count).toBe(3);
    // Stopped: later calls fail at once with the same error, naming the cause; nothing is retried.
    const stopped = errors[4] as QError;
    expect(stopped.message).toMatch(/quota client stopped after 3 identical (acquire|admit) failures/);
    expect(stopped.message).toMatch(reason);
    expect(errors[3]).toBe(stopped);
    expect(failures).toHaveLength(3);
  } finally {
    await q.close();
  }
}

it('a read-only role: acquire fails loudly and the client stops after 3 identical failures', async () => {
  const dsn = await roles.readOnlyDsn('ro');
  await expectStops(dsn, '25006', /read-only/, 'acquire');
});

it('a role without grants: admit fails loudly with permission denied and the client stops', async () => {
  const dsn = await roles.noGrantsDsn('nogrant');
  await expectStops(dsn, '42501', /permission denied/, 'admit');
});
