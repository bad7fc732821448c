// The q-dispatcher defects of issue 17, each as a real process: an unreachable database, cancel's
// report, submit's all-or-nothing, commands that would create tables, help and version, log format.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, runUnderTerminal, stripAnsi, textSink, TS_NODE_ARGS, type TestSchema } from '@q/testing';
import { createCliLogger, usePrettyLogs } from '../src/cli/log.js';
import { COMMAND_USAGE, USAGE } from '../src/cli/usage.js';
import { VERSION } from '../src/version.js';
import { useCliFixture, type CliProcess } from './cli-harness.js';

const f = useCliFixture();

/** The exit status, or 'hung' when the process is still running after `ms`. */
async function exitWithin(p: CliProcess, ms: number): Promise<number | null | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), ms)));
  try {
    return await Promise.race([p.exit, hung]);
  } finally {
    clearTimeout(timer);
  }
}

async function count(sql: string, values: unknown[] = []): Promise<number> {
  const { rows } = await f.schema.pool().query<{ n: string }>(sql, values);
  return Number(rows[0]!.n);
}

const deadline = () => Math.floor(Date.now() / 1000) + 600;

describe('q-dispatcher run', () => {
  it('an unreachable --dsn without --config exits 1 promptly (it used to print the error and hang)', async () => {
    const p = f.startCli(['run', '--dsn', 'postgres://app:hunter2-secret@127.0.0.1:1/nowhere', '--health-port=-1', '--metrics-port=-1']);
    expect(await exitWithin(p, 30_000)).toBe(1);
    expect(p.err()).toContain('q-dispatcher: cannot connect to');
    expect(p.err() + p.out()).not.toContain('hunter2-secret');
  }, 60_000);

  it('--log-level loud and --log-format xml are usage errors (exit 2), not a pino stack', async () => {
    const a = f.startCli(['run', '--log-level', 'loud']);
    expect(await exitWithin(a, 30_000)).toBe(2);
    expect(a.err()).toMatch(/^q-dispatcher: --log-level must be one of fatal, error, warn, info, debug, trace, silent, got "loud"/);
    const b = f.startCli(['run', '--log-format', 'xml']);
    expect(await exitWithin(b, 30_000)).toBe(2);
    expect(b.err()).toMatch(/^q-dispatcher: --log-format must be one of auto, pretty, json, got "xml"/);
  }, 60_000);
});

describe('q-dispatcher cancel', () => {
  it('reports what was really cancelled, per id: 0 when nothing matched (exit 1, issue 37)', async () => {
    const env = { Q_DSN: f.schema.dsn };
    const none = f.startCli(['cancel', 'never-2', 'does-not-exist'], env);
    expect(await none.exit).toBe(1);
    expect(none.out()).toContain('not cancelled  never-2 (no request with this id, or already cancelled)');
    expect(none.out()).toContain('not cancelled  does-not-exist');
    expect(none.out()).toContain('cancelled 0 of 2 request id(s)');

    const file = f.tmpFile('cancel.jsonl', `${JSON.stringify({ id: 'cx-1', deadline: deadline(), payload: {} })}\n`);
    const s = f.startCli(['submit', '--queue', 'cancelq', '--route', 'cancel-out', '--file', file], env);
    expect(await s.exit).toBe(0);
    const some = f.startCli(['cancel', 'cx-1', 'never-2', 'cx-1'], env);
    expect(await some.exit).toBe(1);
    expect(some.out()).toMatch(/^cancelled {6}cx-1$/m);
    expect(some.out()).toContain('cancelled 1 of 2 request id(s)');
    const again = f.startCli(['cancel', 'cx-1'], env);
    expect(await again.exit).toBe(1);
    expect(again.out()).toContain('cancelled 0 of 1 request id(s)');
  }, 120_000);
});

describe('q-dispatcher submit', () => {
  it('a bad line 700 of 800 writes nothing, whatever the batch size', async () => {
    const lines = Array.from({ length: 800 }, (_, i) =>
      i === 699 ? JSON.stringify({ id: `b-${i}`, payload: {} }) : JSON.stringify({ id: `b-${i}`, deadline: deadline(), payload: { i } }),
    );
    const file = f.tmpFile('bad-700.jsonl', `${lines.join('\n')}\n`);
    const s = f.startCli(['submit', '--queue', 'bad700', '--route', 'bad-out', '--file', file, '--batch-size', '100'], { Q_DSN: f.schema.dsn });
    expect(await s.exit).toBe(2);
    expect(s.err()).toContain('submit: line 700: request "b-699": deadline must be Unix seconds > 0; nothing was submitted');
    expect(await count(`SELECT count(*) AS n FROM q_requests WHERE queue = 'bad700'`)).toBe(0);
  }, 90_000);

  it('a line that is not JSON is refused by number; a good file is written whole in batches', async () => {
    const env = { Q_DSN: f.schema.dsn };
    const bad = f.tmpFile('not-json.jsonl', `${JSON.stringify({ id: 'nj-1', deadline: deadline() })}\n{oops\n`);
    const b = f.startCli(['submit', '--queue', 'nj', '--route', 'nj-out', '--file', bad], env);
    expect(await b.exit).toBe(2);
    expect(b.err()).toContain('submit: line 2: not valid JSON; nothing was submitted');
    expect(await count(`SELECT count(*) AS n FROM q_requests WHERE queue = 'nj'`)).toBe(0);

    const good = f.tmpFile(
      'good.jsonl',
      `${Array.from({ length: 250 }, (_, i) => JSON.stringify({ id: `g-${i}`, deadline: deadline() })).join('\n')}\n`,
    );
    const g = f.startCli(['submit', '--queue', 'goodq', '--route', 'good-out', '--file', good, '--batch-size', '100'], env);
    expect(await g.exit).toBe(0);
    expect(g.out()).toContain('submitted 250 requests to queue goodq');
    expect(await count(`SELECT count(*) AS n FROM q_requests WHERE queue = 'goodq'`)).toBe(250);
  }, 90_000);
});

describe('commands on a database without q tables', () => {
  let empty: TestSchema;
  beforeAll(async () => {
    empty = await createTestSchema('dnomig');
  });
  afterAll(async () => {
    await empty?.drop();
  });

  const tables = async () => count(`SELECT count(*) AS n FROM pg_tables WHERE schemaname = $1`, [empty.name]);

  it('status and demo --dsn say so and exit 2 without creating anything; status --migrate creates them', async () => {
    const st = f.startCli(['status', '--dsn', empty.dsn]);
    expect(await st.exit).toBe(2);
    expect(st.err()).toContain(`status: schema "${empty.name}" has no q requests tables; nothing was changed. Pass --migrate`);
    const demo = f.startCli(['demo', '--dsn', empty.dsn, '--requests', '10']);
    expect(await demo.exit).toBe(2);
    expect(demo.err()).toContain(`demo: schema "${empty.name}" has no q requests and quota tables; nothing was changed. Pass --migrate`);
    const sub = f.startCli(['submit', '--dsn', empty.dsn, '--route', 'r', '--file', '/dev/null']);
    expect(await sub.exit).toBe(2);
    expect(sub.err()).toContain('submit: schema');
    expect(await tables()).toBe(0);

    const migrated = f.startCli(['status', '--dsn', empty.dsn, '--migrate', '--json']);
    expect(await migrated.exit).toBe(0);
    expect(JSON.parse(migrated.out())[0]).toMatchObject({ queue: 'request-sql', backlog: 0 });
    expect(await tables()).toBeGreaterThan(0);
    const again = f.startCli(['status', '--dsn', empty.dsn, '--json']); // current now: no flag needed
    expect(await again.exit).toBe(0);
  }, 120_000);
});

describe('help and version', () => {
  it('each command has its own --help (and `help COMMAND`); --version prints the version', async () => {
    for (const cmd of Object.keys(COMMAND_USAGE)) {
      const p = f.startCli([cmd, '--help']);
      expect(await p.exit).toBe(0);
      expect(p.out()).toBe(`${COMMAND_USAGE[cmd]}\n`);
      expect(p.out()).not.toBe(`${USAGE}\n`);
    }
    const h = f.startCli(['help', 'submit']);
    expect(await h.exit).toBe(0);
    expect(h.out()).toContain('usage: q-dispatcher submit');
    const g = f.startCli(['--help']);
    expect(await g.exit).toBe(0);
    expect(g.out()).toBe(`${USAGE}\n`);
    const v = f.startCli(['--version']);
    expect(await v.exit).toBe(0);
    expect(v.out()).toBe(`q-dispatcher ${VERSION}\n`);
    expect(VERSION).toMatch(/^\d+\.\d+\.\d+/);
  }, 120_000);
});

describe('log format', () => {
  it('pretty on a terminal, JSON otherwise, unless forced', () => {
    expect(usePrettyLogs('auto', true)).toBe(true);
    expect(usePrettyLogs('auto', false)).toBe(false);
    expect(usePrettyLogs('json', true)).toBe(false);
    expect(usePrettyLogs('pretty', false)).toBe(true);
    const tty = textSink();
    createCliLogger({ level: 'info', format: 'auto', isTTY: true, destination: tty.sink as never }).info({ owner: 'o' }, 'ready');
    expect(stripAnsi(tty.text())).toMatch(/^\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO.*ready/);
    const pipe = textSink();
    createCliLogger({ level: 'info', format: 'auto', isTTY: false, destination: pipe.sink as never }).info({ owner: 'o' }, 'ready');
    expect(JSON.parse(pipe.text())).toMatchObject({ level: 30, msg: 'ready', svc: 'q-dispatcher' });
  });

  it('`run` under a pseudo-terminal logs human lines; through a pipe, JSON with epoch-ms times', async () => {
    const args = ['run', '--dsn', f.schema.dsn, '--igw-base-url', f.server.url, '--queue', 'logq', '--health-port=-1', '--metrics-port=-1'];
    const cli = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'src', 'cli.ts');
    // A pseudo-terminal as stdout and stderr; the output comes to us through a pipe.
    const { matched, output } = await runUnderTerminal([process.execPath, ...TS_NODE_ARGS, cli, ...args], {
      cwd: path.dirname(cli),
      until: (out) => /\bready\b/.test(out),
      timeoutMs: 60_000,
    });
    expect(matched, output).toBe(true);
    const line = output.split(/\r?\n/).find((l) => /\bready\b/.test(l)) as string;
    expect(line.trimStart().startsWith('{')).toBe(false);
    expect(line).toMatch(/^\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO: ready$/);

    const piped = f.startCli(args);
    const deadlineAt = Date.now() + 60_000;
    while (!/"msg":"ready"/.test(piped.err()) && Date.now() < deadlineAt && piped.child.exitCode === null)
      await new Promise((r) => setTimeout(r, 100));
    piped.child.kill('SIGTERM');
    expect(await piped.exit).toBe(0);
    const json = JSON.parse(
      piped
        .err()
        .split('\n')
        .find((l) => l.includes('"msg":"ready"')) as string,
    ) as { time: unknown; level: unknown };
    expect(typeof json.time).toBe('number');
    expect(json.level).toBe(30);
  }, 150_000);
});
