// q-jobs against a real server: once as a real child process (list --json vs the API), the
// rest through runCli in-process (the same code the bin runs) to keep the suite fast.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import type { JobJson } from '../src/api/job-json.js';
import { runCli } from '../src/cli/q-jobs.js';
import { api, testConfig, TOKEN, TEST_HANDLERS } from './helpers.js';
import { runQJobs } from './spawn.js';

let schema: TestSchema;
let app: WorkerApp;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  schema = await createTestSchema('akw_cli');
  app = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify']), { handlers: TEST_HANDLERS });
  env = { AKERDOCK_API_URL: app.url, AKERDOCK_ADMIN_TOKEN: TOKEN };
  for (let i = 0; i < 3; i++) await app.queue.enqueue({ type: 'report.build', payload: { i } });
});
afterAll(async () => {
  await app?.stop();
  await schema?.drop();
});

const cli = async (args: string[], envOverride: NodeJS.ProcessEnv = {}) => {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, { ...env, ...envOverride }, { out: (t) => (stdout += `${t}\n`), err: (t) => (stderr += `${t}\n`) });
  return { code, stdout, stderr };
};

describe('q-jobs', () => {
  it('list --json (a real q-jobs process) parses and matches the API', async () => {
    const enq = await cli(['enqueue', 'report.build', '--payload', '{"i":99}', '--priority', '2', '--json']);
    expect(enq.code, enq.stderr).toBe(0);
    const created = JSON.parse(enq.stdout) as JobJson;
    expect(created).toMatchObject({ type: 'report.build', payload: { i: 99 }, priority: 2, status: 'queued' });

    const child = await runQJobs(['list', '--json', '--limit', '10'], env);
    expect(child.code, child.stderr).toBe(0);
    const fromApi = (await api(app.url, 'GET', '/jobs?limit=10')).json as { data: JobJson[] };
    expect(JSON.parse(child.stdout)).toEqual(fromApi);
    expect(fromApi.data[0]?.uuid).toBe(created.uuid);
    expect(fromApi.data.length).toBe(4);

    const all = await cli(['list', '--json', '--limit', '1', '--all']);
    expect((JSON.parse(all.stdout) as { data: JobJson[] }).data.map((j) => j.uuid)).toEqual(fromApi.data.map((j) => j.uuid));
  }, 120_000);

  it('prints tables by default and reports API errors with exit status 1', async () => {
    const [job] = (await app.queue.list({ limit: 1 })).jobs;
    const uuid = job?.uuid as string;
    const list = await cli(['list']);
    expect(list.code).toBe(0);
    expect(list.stdout.split('\n')[0]).toMatch(/^UUID\s+QUEUE\s+TYPE\s+STATUS\s+ATTEMPT\s+PROGRESS\s+CREATED\s+ERROR$/);
    expect(list.stdout).toContain(uuid);

    const get = await cli(['get', uuid]);
    expect(get.code).toBe(0);
    expect(get.stdout).toMatch(/status\s+queued/);
    expect(get.stdout).toContain('no steps recorded');
    expect((await cli(['steps', uuid, '--json'])).stdout.trim()).toBe('[]');

    const retry = await cli(['retry', uuid]);
    expect(retry.code).toBe(1);
    expect(retry.stderr).toMatch(/invalid_state \(HTTP 409\)/);

    const cancel = await cli(['cancel', uuid, '--json']);
    expect(cancel.code).toBe(0);
    expect(JSON.parse(cancel.stdout)).toMatchObject({ uuid, status: 'cancelled' });

    const denied = await cli(['list'], { AKERDOCK_ADMIN_TOKEN: 'wrong-token-but-long-enough' });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/forbidden/);

    expect((await cli(['frobnicate'])).code).toBe(2);
    expect((await cli(['get'])).stderr).toMatch(/exactly one job UUID/);
    expect((await cli(['enqueue', 'x', '--payload', '{nope'])).code).toBe(2);
  });
});

describe('q-jobs: progress and snoozes', () => {
  it('shows the progress a handler reported and the snoozes: API JSON, get and list', async () => {
    const job = await app.queue.enqueue({ type: 'report.build', queue: 'backup', payload: { progress: true } });
    const store = await JobStore.open(schema.dsn, { maxConns: 1, migrate: false });
    try {
      const [held] = await store.claim({ queues: ['backup'], workerId: 'cli-test', limit: 1, leaseMs: 60_000 });
      expect(held?.uuid).toBe(job.uuid);
      expect(await store.updateProgress({ id: held!.id, leaseToken: held!.leaseToken }, { pct: 42 })).toBe(true);
      expect((await store.snooze({ id: held!.id, leaseToken: held!.leaseToken }, 3_600_000)).status).toBe('snoozed');
    } finally {
      await store.close();
    }
    const fromApi = (await api(app.url, 'GET', `/jobs/${job.uuid}`)).json as JobJson;
    expect(fromApi).toMatchObject({ uuid: job.uuid, status: 'scheduled', attempt: 0, snoozes: 1, progress: { pct: 42 } });
    const get = await cli(['get', job.uuid]);
    expect(get.code, get.stderr).toBe(0);
    expect(get.stdout).toMatch(/progress\s+\{\\?"pct\\?":42\}/);
    expect(get.stdout).toMatch(/snoozed\s+1×/);
    const list = await cli(['list', '--queue', 'backup']);
    expect(list.code, list.stderr).toBe(0);
    const row = list.stdout.split('\n').find((l) => l.includes(job.uuid));
    expect(row).toMatch(/scheduled\s+0\/5\s+\{\\?"pct\\?":42\}/);
    const json = await cli(['get', job.uuid, '--json']);
    expect((JSON.parse(json.stdout) as JobJson).progress).toEqual({ pct: 42 });
  });
});
