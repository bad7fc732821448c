// Issue 37 (b): one exit-status convention for both apps (docs/deployment.md#exit-codes): 2 for a
// usage or config error, 1 for a failure while running (the database unreachable), the cause on
// one stderr line, its stack only with --log-level debug.
import { describe, expect, it } from 'vitest';
import { useCliFixture } from './cli-harness.js';

const f = useCliFixture();
const UNREACHABLE = 'postgres://postgres@127.0.0.1:1/x';
const CAUSE = 'q-dispatcher: cannot connect to postgres://redacted@127.0.0.1:1/x: connect ECONNREFUSED 127.0.0.1:1\n';

describe('q-dispatcher exit status', () => {
  it('an unknown flag is a usage error: exit 2', async () => {
    const p = f.startCli(['status', '--bogus']);
    expect(await p.exit).toBe(2);
    expect(p.err()).toMatch(/^q-dispatcher: Unknown option '--bogus'/);
  }, 60_000);

  it('an unreachable database is a runtime error for status and run: exit 1, the cause once, no stack', async () => {
    const status = f.startCli(['status', '--dsn', UNREACHABLE]);
    expect(await status.exit).toBe(1);
    expect(status.err()).toBe(CAUSE);
    const run = f.startCli(['run', '--dsn', UNREACHABLE, '--health-port=-1', '--metrics-port=-1', '--log-format', 'json']);
    expect(await run.exit).toBe(1);
    expect(run.err().trim().split('\n').at(-1)).toBe(CAUSE.trim());
    expect(run.err()).not.toMatch(/\n\s+at /);
  }, 60_000);

  it('--log-level debug adds the stack', async () => {
    const p = f.startCli(['status', '--dsn', UNREACHABLE, '--log-level', 'debug']);
    expect(await p.exit).toBe(1);
    expect(p.err()).toMatch(/^q-dispatcher: QError: cannot connect to postgres:\/\/redacted@127\.0\.0\.1:1\/x: .*\n\s+at /);
  }, 60_000);
});
