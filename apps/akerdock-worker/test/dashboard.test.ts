// The web dashboard at /dashboard of the admin port (--dashboard): pages without the token,
// actions only with it, and nothing at /dashboard without the flag.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import { testConfig, TOKEN, TEST_HANDLERS } from './helpers.js';

let schema: TestSchema;
let app: WorkerApp;
let plain: WorkerApp;
let store: JobStore;

beforeAll(async () => {
  schema = await createTestSchema('akw_dash');
  // Consumes only `notify`: jobs put on `default` stay where the test leaves them.
  app = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify', '--dashboard']), { handlers: TEST_HANDLERS });
  plain = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify']), { handlers: TEST_HANDLERS });
  store = await JobStore.open(schema.dsn);
});
afterAll(async () => {
  await store?.close();
  await app?.stop();
  await plain?.stop();
  await schema?.drop();
});

/** A dead-letter job on `default`. */
async function deadLetter(): Promise<string> {
  const [job] = await store.enqueue([{ queue: 'default', type: 'report.build', payload: { n: 1 } }]);
  const [lease] = await store.claim({ queues: ['default'], workerId: 'test', limit: 1, leaseMs: 60_000, start: true });
  expect(lease?.uuid).toBe(job!.uuid);
  await store.fail(lease!, 'broken', null);
  return job!.uuid;
}

const retry = (base: string, uuid: string, headers: Record<string, string>) =>
  fetch(`${base}/dashboard/actions/retry`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-q-dashboard': '1', ...headers },
    body: JSON.stringify({ uuid }),
  });

describe('akerdock-worker --dashboard', () => {
  it('serves the pages and their assets without the token', async () => {
    const page = await fetch(`${app.url}/dashboard/jobs`);
    expect(page.status).toBe(200);
    const text = await page.text();
    expect(text).toContain('<h1>Jobs</h1>');
    expect(text).toContain('href="/dashboard/assets/app.css"');
    expect((await fetch(`${app.url}/dashboard/assets/app.js`)).status).toBe(200);
    expect((await fetch(`${app.url}/dashboard`, { redirect: 'manual' })).headers.get('location')).toBe('/dashboard/jobs');
  });

  it('runs an action only with the admin token', async () => {
    const uuid = await deadLetter();
    expect((await retry(app.url, uuid, {})).status).toBe(401);
    expect((await retry(app.url, uuid, { authorization: `Bearer ${TOKEN}x` })).status).toBe(403);
    expect((await store.list({ status: 'queued', queue: 'default' })).jobs.filter((j) => j.retryOfId !== null)).toEqual([]);
    const ok = await retry(app.url, uuid, { authorization: `Bearer ${TOKEN}` });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ message: expect.stringMatching(/^retried as job \d+$/) });
    const dead = await store.get(uuid);
    expect((await store.list({ status: 'queued', queue: 'default' })).jobs.filter((j) => j.retryOfId === dead!.id)).toHaveLength(1);
  });

  it('serves nothing at /dashboard without the flag', async () => {
    expect((await fetch(`${plain.url}/dashboard/jobs`)).status).toBe(401);
    expect((await fetch(`${plain.url}/dashboard/jobs`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
  });
});
