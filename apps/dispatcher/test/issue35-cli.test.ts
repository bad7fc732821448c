// Issue 35 items 5 and 7 as real `q-dispatcher` processes: cancel with an invalid id among valid
// ones, and a persistent database failure that must end `run` with a non-zero status and a reason.
import { RequestStore } from '@q/store';
import { createTestSchema, testRoles, waitFor } from '@q/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { useCliFixture, type CliProcess } from './cli-harness.js';

const f = useCliFixture();
const deadline = () => Math.floor(Date.now() / 1000) + 600;

describe('q-dispatcher cancel (item 7)', () => {
  it('cancel c-3 "" cancels c-3 and reports the empty id as invalid (exit 2 for the refused id)', async () => {
    const env = { Q_DSN: f.schema.dsn };
    const file = f.tmpFile('c3.jsonl', `${JSON.stringify({ id: 'c-3', deadline: deadline(), payload: {} })}\n`);
    const s = f.startCli(['submit', '--queue', 'cancel35', '--route', 'cancel35-out', '--file', file], env);
    expect(await s.exit).toBe(0);
    const c = f.startCli(['cancel', 'c-3', ''], env);
    expect(await c.exit).toBe(2);
    expect(c.out()).toMatch(/^cancelled {6}c-3$/m);
    expect(c.out()).toContain('invalid        "" (a request id must be a non-empty string)');
    expect(c.out()).toContain('cancelled 1 of 2 request id(s); 1 invalid');
    const { rows } = await f.schema.pool().query<{ cancelled: number }>(`SELECT cancelled::int AS cancelled FROM q_requests WHERE id = 'c-3'`);
    expect(rows).toEqual([{ cancelled: 1 }]);
  }, 120_000);
});

/** `run` on `dsn` against the fixture's endpoint, with fast loops so a failure repeats quickly. */
function startRun(dsn: string): CliProcess {
  return f.startCli([
    'run',
    '--dsn',
    dsn,
    '--igw-base-url',
    f.server.url,
    '--queue',
    'fail35',
    '--health-port=-1',
    '--metrics-port=-1',
    '--lease-ttl-seconds',
    '1.5',
    '--poll-interval-ms',
    '100',
    '--log-format',
    'json',
  ]);
}

/** The process's exit status once it ended, or 'still running' after `ms`. */
async function exitWithin(p: CliProcess, ms: number): Promise<number | null | 'still running'> {
  let timer: NodeJS.Timeout | undefined;
  const running = new Promise<'still running'>((resolve) => (timer = setTimeout(() => resolve('still running'), ms)));
  try {
    return await Promise.race([p.exit, running]);
  } finally {
    clearTimeout(timer);
  }
}

describe('q-dispatcher run after a persistent failure (item 5)', () => {
  let roles: ReturnType<typeof testRoles> | undefined;
  afterAll(async () => roles?.drop());

  it('a REVOKE of its grants ends run with exit 1 and a last line naming the permission problem', async () => {
    roles = testRoles(f.schema);
    const dsn = await roles.dsn('revoked', (r) => roles!.readWriteGrants(r));
    const p = startRun(dsn);
    await waitFor(() => /"msg":"ready"/.test(p.err()) || p.child.exitCode !== null, 60_000, 'dispatcher ready');
    expect(p.err()).toMatch(/"msg":"ready"/);
    await f.schema.pool().query(`REVOKE ALL ON ALL TABLES IN SCHEMA "${f.schema.name}" FROM "${f.schema.name}_revoked"`);
    expect(await exitWithin(p, 60_000)).toBe(1);
    const last = p.err().trim().split('\n').at(-1) ?? '';
    expect(last).toMatch(/^q-dispatcher: stopped after a persistent failure: queue fail35: partition worker failed: .*permission denied/);
  }, 120_000);

  it('a dropped schema ends run with exit 1 and a last line saying so', async () => {
    const own = await createTestSchema('dproc_gone');
    try {
      const store = await RequestStore.open(own.dsn, { maxConns: 1 });
      await store.close();
      const p = startRun(own.dsn);
      await waitFor(() => /"msg":"ready"/.test(p.err()) || p.child.exitCode !== null, 60_000, 'dispatcher ready');
      await own.pool().query(`DROP SCHEMA "${own.name}" CASCADE`);
      expect(await exitWithin(p, 60_000)).toBe(1);
      const last = p.err().trim().split('\n').at(-1) ?? '';
      expect(last).toMatch(
        /^q-dispatcher: stopped after a persistent failure: queue fail35: partition worker failed: .*(undefined table|undefined function|schema does not exist)/,
      );
    } finally {
      await own.drop().catch(() => undefined);
    }
  }, 120_000);
});
