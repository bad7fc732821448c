// The admin API on real HTTP and real Postgres: the auth and validation matrix and the job routes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import { parseConfig } from '../src/config.js';
import type { JobJson } from '../src/api/job-json.js';
import { api, testConfig, TOKEN, TEST_HANDLERS } from './helpers.js';
import { JobStore } from '@q/store';

let schema: TestSchema;
let app: WorkerApp;

beforeAll(async () => {
  schema = await createTestSchema('akw_api');
  // Consumes only `notify`: jobs put on `default` stay queued, so their state is what the test set.
  app = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify', '--body-limit', '2048']), { handlers: TEST_HANDLERS });
});
afterAll(async () => {
  await app?.stop();
  await schema?.drop();
});

const enqueue = async (body: Record<string, unknown>, headers: Record<string, string> = {}) => {
  const r = await api(app.url, 'POST', '/jobs', { body, headers });
  expect(r.status, JSON.stringify(r.json)).toBe(201);
  return r.json as JobJson;
};
const errorCode = (json: unknown) => (json as { error: { code: string } }).error.code;

describe('auth', () => {
  it('answers 401 without a token and 403 with a wrong one, on every job route', async () => {
    const job = await enqueue({ type: 'report.build' });
    const routes: Array<[string, string]> = [
      ['GET', '/jobs'],
      ['POST', '/jobs'],
      ['GET', `/jobs/${job.uuid}`],
      ['POST', `/jobs/${job.uuid}/retry`],
      ['POST', `/jobs/${job.uuid}/forget`],
      ['POST', `/jobs/${job.uuid}/cancel`],
      ['GET', '/nope'],
    ];
    for (const [method, path] of routes) {
      const none = await api(app.url, method, path, { token: null, body: method === 'POST' ? { type: 'x' } : undefined });
      expect(none.status, `${method} ${path}`).toBe(401);
      expect(errorCode(none.json)).toBe('unauthorized');
      expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
      const wrong = await api(app.url, method, path, { token: `${TOKEN}x`, body: method === 'POST' ? { type: 'x' } : undefined });
      expect(wrong.status, `${method} ${path}`).toBe(403);
      expect(errorCode(wrong.json)).toBe('forbidden');
      const basic = await api(app.url, method, path, { token: null, headers: { authorization: `Basic ${TOKEN}` } });
      expect(basic.status).toBe(401);
    }
    // Nothing was changed by the refused calls.
    expect((await api(app.url, 'GET', `/jobs/${job.uuid}`)).json).toMatchObject({ status: 'queued' });
  });

  it('needs no token with --insecure-local (loopback only)', async () => {
    const parsed = parseConfig(
      ['--dsn', schema.dsn, '--listen', '127.0.0.1:0', '--insecure-local', '--queues', 'notify', '--purge-interval', '0'],
      {},
    );
    if (parsed.help) throw new Error('help');
    const open = await startWorkerApp(parsed.config, { handlers: TEST_HANDLERS });
    try {
      expect((await api(open.url, 'GET', '/jobs?limit=1', { token: null })).status).toBe(200);
    } finally {
      await open.stop();
    }
  });

  it('serves health, readiness and the OpenAPI document without a token', async () => {
    expect(await api(app.url, 'GET', '/healthz', { token: null })).toMatchObject({ status: 200, json: { status: 'ok' } });
    expect(await api(app.url, 'GET', '/readyz', { token: null })).toMatchObject({ status: 200, json: { status: 'ready' } });
    const doc = await api(app.url, 'GET', '/openapi.json', { token: null });
    expect(doc.status).toBe(200);
    expect(doc.json).toMatchObject({ openapi: '3.1.0', paths: { '/jobs': { get: {}, post: {} } } });
  });
});

describe('validation', () => {
  it('refuses bad bodies with 400 and a JSON error, writing nothing', async () => {
    const before = (await api(app.url, 'GET', '/jobs?limit=100')).json as { data: JobJson[] };
    const bad: unknown[] = [
      {},
      { type: '' },
      { type: 7 },
      { type: 'x', bogus: 1 },
      { type: 'x', max_attempts: 0 },
      { type: 'x', priority: 1.5 },
      { type: 'x', run_at: 'tomorrow' },
      { type: 'x', queue: '' },
    ];
    for (const body of bad) {
      const r = await api(app.url, 'POST', '/jobs', { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(errorCode(r.json)).toBe('invalid_request');
    }
    const notJson = await api(app.url, 'POST', '/jobs', { rawBody: '{"type":', headers: { 'content-type': 'application/json' } });
    expect(notJson.status).toBe(400);
    expect(errorCode(notJson.json)).toBe('invalid_request');
    const unknownQueue = await api(app.url, 'POST', '/jobs', { body: { type: 'x', queue: 'nope' } });
    expect(unknownQueue.status).toBe(400);
    expect(errorCode(unknownQueue.json)).toBe('unknown_queue');
    const after = (await api(app.url, 'GET', '/jobs?limit=100')).json as { data: JobJson[] };
    expect(after.data.length).toBe(before.data.length);
  });

  it('caps the body size with 413', async () => {
    const r = await api(app.url, 'POST', '/jobs', { body: { type: 'x', payload: { blob: 'x'.repeat(4096) } } });
    expect(r.status).toBe(413);
    expect(errorCode(r.json)).toBe('payload_too_large');
  });

  it('checks list parameters: limit 1–100, status, cursor', async () => {
    for (const limit of ['0', '101', '-1', 'ten']) {
      const r = await api(app.url, 'GET', `/jobs?limit=${limit}`);
      expect(r.status, limit).toBe(400);
      expect(errorCode(r.json)).toBe('invalid_request');
    }
    expect(((await api(app.url, 'GET', '/jobs?limit=0')).json as { error: { message: string } }).error.message).toBe(
      'limit must be between 1 and 100',
    );
    expect((await api(app.url, 'GET', '/jobs?status=failed')).status).toBe(400);
    for (const cursor of ['garbage!', 'djE6YWJj' /* v1:abc */, Buffer.from('v2:5').toString('base64url')]) {
      const r = await api(app.url, 'GET', `/jobs?cursor=${cursor}`);
      expect(r.status, cursor).toBe(400);
      expect(errorCode(r.json)).toBe('invalid_cursor');
    }
    expect((await api(app.url, 'GET', '/jobs?limit=1')).status).toBe(200);
    expect((await api(app.url, 'GET', '/jobs?limit=100')).status).toBe(200);
  });

  it('answers 404 for an unknown uuid and 400 for a malformed one', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    for (const [method, path] of [
      ['GET', ''],
      ['POST', '/retry'],
      ['POST', '/forget'],
      ['POST', '/cancel'],
    ] as const) {
      const r = await api(app.url, method, `/jobs/${unknown}${path}`);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(errorCode(r.json)).toBe('not_found');
      expect((await api(app.url, method, `/jobs/not-a-uuid${path}`)).status).toBe(400);
    }
  });
});

describe('jobs', () => {
  it('enqueues, honours Idempotency-Key, and shows the job', async () => {
    const a = await enqueue(
      { type: 'report.build', payload: { n: 1 }, priority: 3, max_attempts: 2, lock_key: 'report:1' },
      { 'idempotency-key': 'k-1' },
    );
    expect(a).toMatchObject({
      type: 'report.build',
      queue: 'default',
      status: 'queued',
      payload: { n: 1 },
      priority: 3,
      attempt: 0,
      max_attempts: 2,
      lock_key: 'report:1',
      idempotency_key: 'k-1',
      job_key: null,
      steps: [],
      result: null,
      error: null,
      retry_of_id: null,
    });
    const again = await enqueue({ type: 'report.build', payload: { n: 2 } }, { 'idempotency-key': 'k-1' });
    expect(again.uuid).toBe(a.uuid);
    expect(again.payload).toEqual({ n: 1 });
    // A key is held per queue and type: under another type it makes a new job.
    const other = await enqueue({ type: 'something.else', payload: { n: 3 } }, { 'idempotency-key': 'k-1' });
    expect(other.uuid).not.toBe(a.uuid);
    expect(other).toMatchObject({ type: 'something.else', payload: { n: 3 }, idempotency_key: 'k-1' });
    const got = await api(app.url, 'GET', `/jobs/${a.uuid}`);
    expect(got.status).toBe(200);
    expect(got.json).toEqual(a);
    const later = await enqueue({ type: 'report.build', run_at: new Date(Date.now() + 3_600_000).toISOString() });
    expect(later.status).toBe('scheduled');
  });

  it('lists newest first with filters and a cursor that walks every job once', async () => {
    const mine = [];
    for (let i = 0; i < 5; i++) mine.push(await enqueue({ type: 'page.test', payload: { i } }));
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 10; pages++) {
      const r = await api(app.url, 'GET', `/jobs?type=page.test&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(r.status).toBe(200);
      const page = r.json as { data: JobJson[]; next_cursor: string | null };
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((j) => j.uuid));
      cursor = page.next_cursor;
      if (!cursor) break;
    }
    expect(seen).toEqual(mine.map((j) => j.uuid).reverse());
    const byStatus = (await api(app.url, 'GET', '/jobs?status=scheduled&limit=100')).json as { data: JobJson[] };
    expect(byStatus.data.length).toBeGreaterThan(0);
    expect(byStatus.data.every((j) => j.status === 'scheduled')).toBe(true);
  });

  it('refuses retry and forget of a job that is not dead-lettered (409), cancels a queued one once', async () => {
    const job = await enqueue({ type: 'report.build' });
    for (const action of ['retry', 'forget']) {
      const r = await api(app.url, 'POST', `/jobs/${job.uuid}/${action}`);
      expect(r.status, action).toBe(409);
      expect(errorCode(r.json)).toBe('invalid_state');
    }
    const cancelled = await api(app.url, 'POST', `/jobs/${job.uuid}/cancel`);
    expect(cancelled.status).toBe(202);
    expect(cancelled.json).toMatchObject({ uuid: job.uuid, status: 'cancelled' });
    const twice = await api(app.url, 'POST', `/jobs/${job.uuid}/cancel`);
    expect(twice.status).toBe(409);
    expect(errorCode(twice.json)).toBe('invalid_state');
  });
});

describe('groups', () => {
  it('POST /jobs stores a group (a webhook defaults to its URL host) and GET /groups counts the running jobs per group', async () => {
    const grouped = await enqueue({ type: 'report.build', group: 'tenant:7' });
    expect(grouped.group).toBe('tenant:7');
    expect((await api(app.url, 'GET', `/jobs/${grouped.uuid}`)).json).toMatchObject({ group: 'tenant:7' });
    const bad = await api(app.url, 'POST', '/jobs', { body: { type: 'report.build', group: '' } });
    expect(bad.status).toBe(400);

    // A worker serving webhook.deliver (this one only enqueues: it consumes notify).
    const hooks = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify']), {
      handlers: { ...TEST_HANDLERS, 'webhook.deliver': async () => undefined },
    });
    try {
      const r = await api(hooks.url, 'POST', '/jobs', {
        body: { type: 'webhook.deliver', queue: 'webhook', payload: { url: 'https://hooks.example.com:8443/in' } },
      });
      expect(r.status).toBe(201);
      expect((r.json as JobJson).group).toBe('host:hooks.example.com:8443');
      const own = await api(hooks.url, 'POST', '/jobs', {
        body: { type: 'webhook.deliver', queue: 'webhook', group: 'mine', payload: { url: 'https://a.example/' } },
      });
      expect((own.json as JobJson).group).toBe('mine');
    } finally {
      await hooks.stop();
    }

    // Lease jobs of two groups as a worker would, and read the counts.
    for (const group of ['tenant:7', 'tenant:7', 'tenant:8']) await enqueue({ type: 'report.build', queue: 'deploy', group });
    const store = await JobStore.open(schema.dsn, { maxConns: 2, migrate: false });
    try {
      const leased = await store.claim({ queues: ['deploy'], workerId: 'groups-test', limit: 10, leaseMs: 60_000 });
      expect(leased).toHaveLength(3);
      const counts = await api(app.url, 'GET', '/groups?queue=deploy');
      expect(counts.status).toBe(200);
      expect(counts.json).toEqual({
        data: [
          { queue: 'deploy', group: 'tenant:7', running: 2 },
          { queue: 'deploy', group: 'tenant:8', running: 1 },
        ],
      });
      expect(((await api(app.url, 'GET', '/groups?limit=1')).json as { data: unknown[] }).data).toHaveLength(1);
      expect((await api(app.url, 'GET', '/groups?limit=0')).status).toBe(400);
      expect((await api(app.url, 'GET', '/groups', { token: null })).status).toBe(401);
      await store.release(leased.map((j) => ({ id: j.id, leaseToken: j.leaseToken })));
    } finally {
      await store.close();
    }
  });
});
