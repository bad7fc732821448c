// The bins as real processes: exit statuses, help and version texts, and the log format a
// terminal gets (run under a pseudo-terminal with `script`).
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, runUnderTerminal, textSink, type TestSchema } from '@q/testing';
import { COMMAND_USAGE, CLI_USAGE, runCli } from '../src/cli/q-jobs.js';
import { USAGE } from '../src/config.js';
import { createLogger, usePrettyLogs } from '../src/logger.js';
import { bin, NODE_ARGS, runQJobs, runWorker, spawnWorker } from './spawn.js';
import { TOKEN } from './helpers.js';

const VERSION = (JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

const cli = async (args: string[]) => {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, {}, { out: (t) => (stdout += `${t}\n`), err: (t) => (stderr += `${t}\n`) });
  return { code, stdout, stderr };
};

describe('akerdock-worker process', () => {
  it('--log-level loud is a config error with exit status 2, not a pino stack', async () => {
    const r = await runWorker(['--log-level', 'loud', '--insecure-local']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^akerdock-worker: --log-level must be one of fatal, error, warn, info, debug, trace, silent, got "loud"/);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(r.stderr).not.toContain('custom levels');
  });

  it('--dsn mysql://… exits 2 naming only the scheme, never the DSN', async () => {
    const r = await runWorker(['--dsn', 'mysql://app:hunter2-secret@db/app', '--insecure-local']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^akerdock-worker: --dsn: unsupported DSN scheme "mysql:" \(want postgres:\/\/ or postgresql:\/\/\)/);
    expect(r.stderr).not.toContain('hunter2-secret');
    expect(r.stderr).not.toContain('app@db');
  });

  it('--version prints the package version; --help the usage', async () => {
    const v = await runWorker(['--version']);
    expect(v).toMatchObject({ code: 0, stdout: `akerdock-worker ${VERSION}\n` });
    const h = await runWorker(['--help']);
    expect(h.code).toBe(0);
    expect(h.stdout).toBe(`${USAGE}\n`);
    expect(h.stdout).toContain('--version');
  });
});

describe('q-jobs help', () => {
  it('each command has its own --help (and `help COMMAND`), the global usage otherwise', async () => {
    for (const cmd of ['enqueue', 'list', 'get', 'steps', 'retry', 'forget', 'cancel']) {
      const r = await cli([cmd, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout.startsWith(`usage: q-jobs ${cmd} `)).toBe(true);
      expect(r.stdout).toContain(COMMAND_USAGE[cmd]);
      expect(r.stdout).not.toContain(CLI_USAGE);
      expect((await cli(['help', cmd])).stdout).toBe(r.stdout);
    }
    expect((await cli(['list', '--help'])).stdout).toContain('--cursor');
    expect((await cli(['enqueue', '--help'])).stdout).toContain('--payload-file');
    expect((await cli(['--help'])).stdout).toBe(`${CLI_USAGE}\n`);
    expect(await cli(['help', 'frobnicate'])).toMatchObject({ code: 2 });
    // A usage error of one command shows that command's help.
    const bad = await cli(['get']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(COMMAND_USAGE.get);
  });

  it('q-jobs --version (a real process)', async () => {
    const r = await runQJobs(['--version']);
    expect(r).toMatchObject({ code: 0, stdout: `q-jobs ${VERSION}\n` });
    expect((await runQJobs(['list', '--help'])).stdout).toContain(COMMAND_USAGE.list);
  });
});

describe('log format', () => {
  it('pretty on a terminal, JSON on a pipe, unless forced', () => {
    expect(usePrettyLogs('auto', true)).toBe(true);
    expect(usePrettyLogs('auto', false)).toBe(false);
    expect(usePrettyLogs('json', true)).toBe(false);
    expect(usePrettyLogs('pretty', false)).toBe(true);

    const tty = textSink();
    createLogger('info', { destination: tty.sink, format: 'auto', isTTY: true }).info({ job: 7, token: 'tok-secret' }, 'hello there');
    expect(tty.text()).toMatch(/^\S*\[\d{2}:\d{2}:\d{2}\.\d{3}\]\S* \S*INFO\S*.*hello there/);
    expect(tty.text()).not.toMatch(/^\{/);
    expect(tty.text()).not.toContain('tok-secret'); // redaction applies to pretty lines too

    const pipe = textSink();
    createLogger('info', { destination: pipe.sink, format: 'auto', isTTY: false }).info({ job: 7 }, 'hello there');
    const line = JSON.parse(pipe.text()) as { msg: string; time: number };
    expect(line.msg).toBe('hello there');
    expect(typeof line.time).toBe('number');
  });

  let schema: TestSchema;
  beforeAll(async () => {
    schema = await createTestSchema('akw_tty');
  });
  afterAll(async () => {
    await schema?.drop();
  });

  it('the worker under a pseudo-terminal logs human lines; through a pipe, JSON', async () => {
    const args = [
      ...NODE_ARGS,
      bin('akerdock-worker'),
      '--dsn',
      schema.dsn,
      '--listen',
      '127.0.0.1:0',
      '--admin-token',
      TOKEN,
      '--queues',
      'notify',
      '--purge-interval',
      '0',
    ];
    const { matched, output } = await runUnderTerminal([process.execPath, ...args], {
      until: (out) => out.includes('akerdock-worker started'),
      timeoutMs: 45_000,
    });
    expect(matched, output).toBe(true);
    const line = output.split(/\r?\n/).find((l) => l.includes('akerdock-worker started')) as string;
    expect(line.trimStart().startsWith('{')).toBe(false);
    expect(line).toMatch(/^\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO:? .*akerdock-worker started/);

    // The same command with stdout a pipe: JSON lines with epoch-ms times.
    const piped = spawnWorker(args.slice(NODE_ARGS.length + 1));
    try {
      const json = await piped.line('akerdock-worker started', 45_000);
      expect(typeof json.time).toBe('number');
      expect(json.level).toBe(30);
    } finally {
      piped.child.kill('SIGTERM');
      await piped.exited;
    }
  }, 90_000);
});
