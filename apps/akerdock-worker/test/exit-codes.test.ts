// Issue 37 (b): one exit-status convention for both apps (docs/deployment.md#exit-codes): 2 for a
// usage or config error, 1 for a failure while running (the database unreachable), the cause on
// one stderr line, its stack only with --log-level debug.
import { describe, expect, it } from 'vitest';
import { createTestSchema } from '@q/testing';
import { runWorker } from './spawn.js';

const UNREACHABLE = 'postgres://postgres@127.0.0.1:1/x';

describe('akerdock-worker exit status', () => {
  it('an unknown flag is a usage error: exit 2', async () => {
    const r = await runWorker(['--bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^akerdock-worker: Unknown option '--bogus'/);
  });

  it('an unreachable database is a runtime error: exit 1, the cause once on one line, no stack', async () => {
    const r = await runWorker(['--dsn', UNREACHABLE, '--listen', '127.0.0.1:0', '--insecure-local']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'akerdock-worker: could not start: cannot connect to postgres://redacted@127.0.0.1:1/x: connect ECONNREFUSED 127.0.0.1:1\n',
    );
    expect(r.stdout).not.toContain('ECONNREFUSED');
  }, 60_000);

  it('--log-level debug adds the stack', async () => {
    const r = await runWorker(['--dsn', UNREACHABLE, '--listen', '127.0.0.1:0', '--insecure-local', '--log-level', 'debug']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^akerdock-worker: could not start: QError: cannot connect to postgres:\/\/redacted@127\.0\.0\.1:1\/x: .*\n\s+at /);
  }, 60_000);

  it('a --purge-cron the scheduler cannot read is a config error: exit 2, nothing scheduled (issue 38)', async () => {
    const schema = await createTestSchema('akw_exit');
    try {
      const r = await runWorker(['--dsn', schema.dsn, '--listen', '127.0.0.1:0', '--insecure-local', '--purge-cron', '0 0 31 2 *']);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^akerdock-worker: could not start: --purge-cron: schedule: cron must have a slot after now\n$/);
      const { rows } = await schema.pool().query('SELECT name FROM q_schedules');
      expect(rows).toEqual([]);
      const interval = await runWorker(['--dsn', schema.dsn, '--insecure-local', '--purge-interval', '7m']);
      expect(interval.code).toBe(2);
      expect(interval.stderr).toMatch(/^akerdock-worker: --purge-interval "7m" does not divide .*set --purge-cron/);
    } finally {
      await schema.drop();
    }
  }, 60_000);
});
