// Issue 37 (c): q-jobs says what to do. A refused token names AKERDOCK_ADMIN_TOKEN and --token, a
// refused connection asks whether the worker runs there, a bad --payload-file or --status is a
// usage error (exit 2) listing what is allowed, and a job type no handler serves is refused by the
// admin API (400 unknown_type) before it could burn its attempts.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import { runCli } from '../src/cli/q-jobs.js';
import { api, testConfig, TOKEN } from './helpers.js';
import { runQJobs } from './spawn.js';

let schema: TestSchema;
let app: WorkerApp;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  schema = await createTestSchema('akw_hints');
  app = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify']));
  env = { AKERDOCK_API_URL: app.url, AKERDOCK_ADMIN_TOKEN: TOKEN };
});
afterAll(async () => {
  await app?.stop();
  await schema?.drop();
});

const cli = async (args: string[], over: NodeJS.ProcessEnv = {}) => {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, { ...env, ...over }, { out: (t) => (stdout += `${t}\n`), err: (t) => (stderr += `${t}\n`) });
  return { code, stdout, stderr };
};
const jobCount = async () => Number((await schema.pool().query<{ n: string }>('SELECT count(*) AS n FROM q_jobs_all')).rows[0]!.n);

describe('q-jobs hints', () => {
  it('401 (no token) and 403 (a wrong one) name AKERDOCK_ADMIN_TOKEN and --token', async () => {
    const none = await cli(['list'], { AKERDOCK_ADMIN_TOKEN: undefined });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^error: unauthorized \(HTTP 401\): .*\nhint: set AKERDOCK_ADMIN_TOKEN or pass --token/);
    const wrong = await cli(['list', '--token', 'wrong-token-but-long-enough']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^error: forbidden \(HTTP 403\): .*\nhint: check AKERDOCK_ADMIN_TOKEN or --token/);
    const asJson = JSON.parse((await cli(['list', '--json'], { AKERDOCK_ADMIN_TOKEN: undefined })).stderr) as { error: { hint: string } };
    expect(asJson.error.hint).toContain('AKERDOCK_ADMIN_TOKEN');
  });

  it('a refused connection asks whether the worker runs at that URL (a real q-jobs process)', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const url = `http://127.0.0.1:${port}`;
    const r = await runQJobs(['list'], { AKERDOCK_API_URL: url, AKERDOCK_ADMIN_TOKEN: TOKEN });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`error: connection refused: is the worker running at ${url}? (--url, AKERDOCK_API_URL)\n`);
  }, 60_000);

  it('a missing --payload-file is a usage error, exit 2 (a real q-jobs process), nothing enqueued', async () => {
    const before = await jobCount();
    const r = await runQJobs(['enqueue', 'notify.send', '--payload-file', '/nonexistent/payload.json'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^--payload-file: cannot read \/nonexistent\/payload\.json: no such file\n/);
    expect(await jobCount()).toBe(before);
  }, 60_000);

  it('an invalid --status is a usage error listing the allowed values', async () => {
    const r = await cli(['list', '--status', 'failed']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^--status must be one of scheduled, queued, leased, running, retry_wait, succeeded, cancelled, dead_letter, waiting, got "failed"\n/,
    );
  });

  it('a type no handler serves: POST /jobs answers 400 unknown_type, nothing written; q-jobs shows it', async () => {
    const before = await jobCount();
    const r = await api(app.url, 'POST', '/jobs', { body: { type: 'report.bulid', queue: 'task' } });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      error: {
        code: 'unknown_type',
        message: 'no handler serves job type "report.bulid" (served: maintenance.purge, notify.send, webhook.deliver)',
      },
    });
    const c = await cli(['enqueue', 'report.bulid']);
    expect(c.code).toBe(1);
    expect(c.stderr).toContain('error: unknown_type (HTTP 400): no handler serves job type "report.bulid"');
    expect(await jobCount()).toBe(before);
    const served = await cli(['enqueue', 'notify.send', '--queue', 'notify', '--payload', '{"message":"hi"}', '--json']);
    expect(served.code, served.stderr).toBe(0);
    expect(await jobCount()).toBe(before + 1);
  });
});
