// The web dashboard at /dashboard of the admin port (--dashboard): pages behind HTTP Basic with the
// admin token as the password (open with --insecure-local), actions only with the bearer token,
// and nothing at /dashboard without the flag.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import { testConfig, TOKEN, TEST_HANDLERS } from './helpers.js';

let schema: TestSchema;
let app: WorkerApp;
let plain: WorkerApp;
let local: WorkerApp;
let store: JobStore;

beforeAll(async () => {
  schema = await createTestSchema('akw_dash');
  // Consumes only `notify`: jobs put on `default` stay where the test leaves them.
  app = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify', '--dashboard']), { handlers: TEST_HANDLERS });
  plain = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify']), { handlers: TEST_HANDLERS });
  // --insecure-local: no admin token (testConfig always sets one).
  local = await startWorkerApp(
    { ...testConfig(schema.dsn, ['--queues', 'notify', '--dashboard']), adminToken: undefined, insecureLocal: true },
    { handlers: TEST_HANDLERS },
  );
  store = await JobStore.open(schema.dsn);
});
afterAll(async () => {
  await store?.close();
  await app?.stop();
  await plain?.stop();
  await local?.stop();
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
  it('serves the pages and their assets with the admin token as the HTTP Basic password', async () => {
    const asked = await fetch(`${app.url}/dashboard/jobs`);
    expect(asked.status).toBe(401);
    expect(asked.headers.get('www-authenticate')).toBe('Basic realm="q dashboard", charset="UTF-8"');
    expect(await asked.text()).not.toContain('<h1>Jobs</h1>');
    const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });
    // A wrong password, a bearer token and a value without a colon are asked again (401), never served.
    for (const headers of [
      basic('ops', `${TOKEN}x`),
      basic('ops', ''),
      { authorization: `Bearer ${TOKEN}` },
      { authorization: `Basic ${Buffer.from(TOKEN).toString('base64')}` },
    ]) {
      const r = await fetch(`${app.url}/dashboard/jobs`, { headers });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
    }
    // Any user name, empty too.
    for (const user of ['ops', '']) {
      const page = await fetch(`${app.url}/dashboard/jobs`, { headers: basic(user, TOKEN) });
      expect(page.status).toBe(200);
      const text = await page.text();
      expect(text).toContain('<h1>Jobs</h1>');
      expect(text).toContain('href="/dashboard/assets/app.css"');
    }
    expect((await fetch(`${app.url}/dashboard/assets/app.js`)).status).toBe(401);
    expect((await fetch(`${app.url}/dashboard/assets/app.js`, { headers: basic('ops', TOKEN) })).status).toBe(200);
    expect((await fetch(`${app.url}/dashboard`, { redirect: 'manual', headers: basic('ops', TOKEN) })).headers.get('location')).toBe(
      '/dashboard/jobs',
    );
  });

  it('serves the pages without a password with --insecure-local', async () => {
    const page = await fetch(`${local.url}/dashboard/jobs`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<h1>Jobs</h1>');
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
