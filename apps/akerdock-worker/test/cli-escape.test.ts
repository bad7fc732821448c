// q-jobs never prints a raw control character (issue #35 item 16): job fields are anyone's text,
// and an escape sequence in a job type, lock key or error message would reach the operator's
// terminal. Real server, real Postgres; the table, the detail view and --json are checked.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import { runCli } from '../src/cli/q-jobs.js';
import { escapeBlock, escapeField, escapeJson } from '../src/cli/escape.js';
import { testConfig, TOKEN } from './helpers.js';

let schema: TestSchema;
let app: WorkerApp;
let uuid: string;
// OSC window title, clear screen, a forged line, a C1 CSI, a bidi override.
const EVIL = 'report\u001b]0;pwned\u0007\u001b[2J\r\nstatus  succeeded\u009b31m\u202etxt.exe';

beforeAll(async () => {
  schema = await createTestSchema('akw_esc');
  app = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify']));
  const job = await app.queue.enqueue({ type: EVIL, lockKey: EVIL, payload: { note: EVIL } });
  uuid = job.uuid;
});
afterAll(async () => {
  await app?.stop();
  await schema?.drop();
});

const cli = async (args: string[]) => {
  let stdout = '';
  let stderr = '';
  const env = { AKERDOCK_API_URL: app.url, AKERDOCK_ADMIN_TOKEN: TOKEN };
  const code = await runCli(args, env, { out: (t) => (stdout += `${t}\n`), err: (t) => (stderr += `${t}\n`) });
  return { code, stdout, stderr };
};

/** Any character a terminal acts on, except the line breaks q-jobs itself prints. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe('q-jobs output', () => {
  it('list, get and --json show control characters escaped, never raw', async () => {
    const list = await cli(['list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).not.toMatch(RAW);
    expect(list.stdout).toContain('report\\x1b]0;pwned\\x07\\x1b[2J\\r\\nstatus  succeeded\\x9b31m\\u202etxt.exe');
    const get = await cli(['get', uuid]);
    expect(get.code, get.stderr).toBe(0);
    expect(get.stdout).not.toMatch(RAW);
    // The forged "status  succeeded" line does not start a line of its own.
    expect(get.stdout.split('\n').filter((l) => l.startsWith('status'))).toEqual([expect.stringMatching(/^status\s+queued$/)]);
    const json = await cli(['get', uuid, '--json']);
    expect(json.stdout).not.toMatch(RAW);
    // Still the same JSON value.
    expect((JSON.parse(json.stdout) as { type: string }).type).toBe(EVIL);
    // An error message echoing the input is escaped too.
    const err = await cli(['get', `${EVIL}`]);
    expect(err.code).not.toBe(0);
    expect(err.stderr).not.toMatch(RAW);
  });

  it('escape helpers', () => {
    expect(escapeField('a\u001b[31mb\nc')).toBe('a\\x1b[31mb\\nc');
    expect(escapeBlock('a\u001b[31mb\nc')).toBe('a\\x1b[31mb\nc');
    expect(JSON.parse(escapeJson(JSON.stringify({ s: '\u009b\u202e\u007f' })))).toEqual({ s: '\u009b\u202e\u007f' });
  });
});
