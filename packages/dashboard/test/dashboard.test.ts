import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { Consumer } from '@q/partition-consumer';
import { createQuota, type Quota } from '@q/quota';
import { migrate } from '@q/schema';
import { JobStore, RequestStore } from '@q/store';
import { createTestSchema, newRequests, type TestSchema } from '@q/testing';
import { createDashboard, type Dashboard } from '../src/index.js';
import { launch, watchedPage } from './browser.js';

// The README's screenshots are refreshed with Q_DASHBOARD_SCREENSHOTS=1; other runs write them to a scratch folder.
const SHOTS =
  process.env.Q_DASHBOARD_SCREENSHOTS === '1'
    ? path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'docs')
    : fs.mkdtempSync(path.join(os.tmpdir(), 'q-dashboard-'));
/** The page globals the tests read (the test files are compiled without the DOM library). */
interface Browserish {
  document: { body: { dataset: Record<string, string | undefined> } };
  __pwned?: number;
}

const TOKEN = 'test-token-0123456789abcdef';

let schema: TestSchema;
let store: JobStore;
let requests: RequestStore;
let quota: Quota;
let dashboard: Dashboard;
let readOnly: Dashboard;
let server: http.Server;
let base: string;
let browser: Browser;
let deadUuid: string;
let scriptUuid: string;
let flowId: string;
let doneUuid: string;
const consumers: Consumer[] = [];

/** Serves `d` under /dashboard and `ro` under /ro on one port. */
async function listen(d: Dashboard, ro: Dashboard): Promise<string> {
  server = http.createServer((req, res) => {
    if (req.url?.startsWith('/ro')) void ro.handle(req, res);
    else void d.handle(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address() as { port: number };
  return `http://127.0.0.1:${addr.port}`;
}

/** Enqueues `n` jobs of `type` on `queue`. */
async function enqueue(queue: string, type: string, n: number, payload: unknown = { n: 1 }) {
  return store.enqueue(Array.from({ length: n }, () => ({ queue, type, payload })));
}

beforeAll(async () => {
  schema = await createTestSchema('dash');
  const pool = schema.pool();
  await migrate(pool, { modules: ['jobs', 'requests', 'quota'] });
  store = await JobStore.fromPool(pool, { migrate: false });
  // The known mix: mail 5 queued; img 2 running, 1 succeeded, 1 dead letter, 1 queued (with a script payload).
  await enqueue('mail', 'send', 5);
  await enqueue('img', 'resize', 4, { size: 3 });
  const leased = await store.claim({ queues: ['img'], workerId: 'worker-a', limit: 4, leaseMs: 60_000, start: true });
  expect(leased).toHaveLength(4);
  await store.succeed(leased[0]!, { ok: true }, [
    { name: 'download', status: 'succeeded', started_at: '2026-01-01T00:00:00.000Z', finished_at: '2026-01-01T00:00:00.400Z' },
    { name: 'resize', status: 'succeeded', started_at: '2026-01-01T00:00:00.400Z', finished_at: '2026-01-01T00:00:01.000Z' },
  ]);
  doneUuid = leased[0]!.uuid;
  await store.fail(leased[1]!, 'image too large', null);
  deadUuid = leased[1]!.uuid;
  const flow = await store.flows.insert({
    name: 'thumbnails',
    nodes: [
      { ref: 'fetch', type: 'fetch', queue: 'flow' },
      { ref: 'small', type: 'resize', queue: 'flow', dependsOn: ['fetch'] },
      { ref: 'large', type: 'resize', queue: 'flow', dependsOn: ['fetch'] },
      { ref: 'publish', type: 'publish', queue: 'flow', dependsOn: ['small', 'large'] },
    ],
  });
  flowId = flow.flowId;
  const [fetchJob] = await store.claim({ queues: ['flow'], workerId: 'worker-f', limit: 1, leaseMs: 60_000, start: true });
  await store.succeed(fetchJob!, { bytes: 1024 });
  await store.upsertSchedule({
    name: 'nightly-report',
    cron: '0 3 * * *',
    timezone: 'UTC',
    queue: 'mail',
    type: 'report',
    nextFireAt: new Date(Date.now() + 3_600_000),
  });
  const [script] = await enqueue('img', 'resize', 1, { caption: '<script>window.__pwned = 1</script><b>bold</b>' });
  scriptUuid = script!.uuid;

  requests = await RequestStore.fromPool(pool, { migrate: false });
  await requests.enqueue(newRequests('chat', ['r1', 'r2', 'r3']));
  const now = await requests.now();
  const a = new Consumer(requests, 'chat', 'dispatcher-a', { leaseTtlMs: 30_000, drainTimeoutMs: 0 });
  const b = new Consumer(requests, 'chat', 'dispatcher-b', { leaseTtlMs: 30_000, drainTimeoutMs: 0 });
  consumers.push(a, b);
  await a.rebalance(now);
  // b joins; a drains down to its share and releases, b acquires: a few rounds settle it.
  for (let i = 1; i <= 4; i++) {
    const t = new Date(now.getTime() + i * 100);
    await b.rebalance(t);
    await a.rebalance(t);
  }

  quota = await createQuota({ pool, ttlMs: 30_000 });
  await quota.acquire('tenant:acme', 3);
  await quota.acquire('tenant:acme', 3);
  expect(await quota.admit('tenant:acme:rate', 10, 60_000)).toBe(true);

  dashboard = await createDashboard({ pool, basePath: '/dashboard', showPayloads: true, actions: { token: TOKEN }, refreshMs: 1000 });
  readOnly = await createDashboard({ pool, basePath: '/ro' });
  base = await listen(dashboard, readOnly);
  browser = await launch();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  await dashboard?.close();
  await readOnly?.close();
  await quota?.close();
  for (const c of consumers) await c.close().catch(() => undefined);
  await requests?.close();
  await store?.close();
  await schema?.drop();
  if (process.env.Q_DASHBOARD_SCREENSHOTS !== '1') fs.rmSync(SHOTS, { recursive: true, force: true });
});

describe('dashboard in a browser', () => {
  it('loads every page without console errors and saves a screenshot of each', async () => {
    const errors: string[] = [];
    const page = await watchedPage(browser, errors);
    const pages: Array<[string, string, string]> = [
      ['jobs', '/dashboard/jobs', '#counts'],
      ['job', `/dashboard/jobs/${doneUuid}`, 'svg.timeline'],
      ['flows', '/dashboard/flows', '#flows'],
      ['flow', `/dashboard/flows/${flowId}`, 'svg.flow'],
      ['schedules', '/dashboard/schedules', '#schedules'],
      ['requests', '/dashboard/requests', 'svg.partitions'],
      ['quotas', '/dashboard/quotas', '#quota-keys'],
    ];
    for (const [name, url, selector] of pages) {
      const res = await page.goto(base + url);
      expect(res?.status(), url).toBe(200);
      await page.waitForSelector(selector);
      await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
    }
    // Stay long enough for a live refresh to run.
    await page.goto(`${base}/dashboard/jobs`);
    await page.waitForFunction(() => (globalThis as unknown as Browserish).document.body.dataset.updated !== undefined, undefined, {
      timeout: 10_000,
    });
    expect(errors).toEqual([]);
    for (const [name] of pages) expect(fs.statSync(path.join(SHOTS, `${name}.png`)).size).toBeGreaterThan(5000);
    await page.close();
  });

  it('shows counts on the jobs page that match the database', async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/dashboard/jobs`);
    const cell = (queue: string, status: string) => page.locator(`#counts tr[data-queue="${queue}"] td[data-status="${status}"]`).innerText();
    const { rows } = await schema
      .pool()
      .query<{ queue: string; status: string; n: string }>(`SELECT queue, status::text AS status, count(*) AS n FROM q_jobs_all GROUP BY 1, 2`);
    expect(rows.length).toBeGreaterThan(3);
    for (const r of rows) expect(await cell(r.queue, r.status), `${r.queue} ${r.status}`).toBe(r.n);
    expect(await cell('mail', 'queued')).toBe('5');
    expect(await cell('img', 'running')).toBe('2');
    expect(await cell('img', 'dead_letter')).toBe('1');
    expect(await cell('img', 'succeeded')).toBe('1');
    expect(await cell('flow', 'waiting')).toBe('1');
    // The chart counts the finished jobs of the last hour.
    const done = await schema
      .pool()
      .query<{ n: string }>(`SELECT count(*) AS n FROM q_jobs_archive WHERE status = 'succeeded' AND finished_at > now() - interval '1 hour'`);
    expect(done.rows[0]!.n).toBe('2'); // the img job and the flow's first node
    expect(await page.locator('figure.chart figcaption').innerText()).toContain('succeeded 2');
    // The list filters by queue and status.
    await page.goto(`${base}/dashboard/jobs?queue=img&status=dead_letter`);
    expect(await page.locator('#jobs tbody tr').count()).toBe(1);
    expect(await page.locator(`#jobs tr[data-uuid="${deadUuid}"]`).count()).toBe(1);
    await page.close();
  });

  it('pages the job list with a cursor', async () => {
    await enqueue('bulk', 'x', 60);
    const page = await browser.newPage();
    await page.goto(`${base}/dashboard/jobs?queue=bulk`);
    expect(await page.locator('#jobs tbody tr').count()).toBe(50);
    await page.click('a[rel=next]');
    expect(await page.locator('#jobs tbody tr').count()).toBe(10);
    expect(await page.locator('a[rel=next]').count()).toBe(0);
    await page.close();
  });

  it('draws the partition grid with both dispatchers sharing the queue after a rebalance', async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/dashboard/requests`);
    const owners = await page
      .locator('svg.partitions[data-queue="chat"] g.partition')
      .evaluateAll((gs) => gs.map((g) => g.getAttribute('data-owner')));
    expect(owners).toHaveLength(64);
    const held = (o: string) => owners.filter((x) => x === o).length;
    expect(held('dispatcher-a')).toBe(32);
    expect(held('dispatcher-b')).toBe(32);
    expect(await page.locator('section[data-queue="chat"] tr.member[data-owner="dispatcher-a"] td[data-held]').innerText()).toBe('32');
    expect(await page.locator('section[data-queue="chat"] table.pending td').first().innerText()).toBe('3');
    await page.close();
  });

  it('draws a flow as a graph with node statuses and edges', async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/dashboard/flows/${flowId}`);
    const nodes = await page
      .locator('svg.flow g.flow-node')
      .evaluateAll((gs) => gs.map((g) => `${g.getAttribute('data-ref')}:${g.getAttribute('data-status')}`));
    expect(nodes.sort()).toEqual(['fetch:succeeded', 'large:queued', 'publish:waiting', 'small:queued']);
    expect(await page.locator('svg.flow path.edge').count()).toBe(4);
    await page.goto(`${base}/dashboard/schedules`);
    expect(await page.locator('#schedules tr[data-schedule="nightly-report"]').count()).toBe(1);
    await page.close();
  });

  it('shows quota slots in use and admissions', async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/dashboard/quotas`);
    expect(await page.locator('#quota-keys tr[data-key="tenant:acme"] td[data-used]').innerText()).toBe('2');
    // The limit of the latest acquire (3), stored by q_quota_acquire.
    expect(await page.locator('#quota-keys tr[data-key="tenant:acme"] td[data-limit]').innerText()).toBe('3');
    expect(await page.locator('#quota-windows tr[data-key="tenant:acme:rate"] td[data-admitted]').innerText()).toBe('1');
    await page.close();
  });

  it('shows a payload holding <script> as text', async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/dashboard/jobs/${scriptUuid}`);
    const text = await page.locator('#payload pre').innerText();
    expect(text).toContain('<script>window.__pwned = 1</script><b>bold</b>');
    expect(await page.locator('#payload b').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as unknown as Browserish).__pwned)).toBeUndefined();
    await page.close();
  });

  it('refuses actions without the token, and on a read-only dashboard', async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/dashboard/jobs/${deadUuid}`);
    await page.click('#job-actions form[data-action="retry"] button');
    await page.waitForSelector('#action-result.refused');
    expect(await page.locator('#action-result').innerText()).toContain('bearer token');
    await page.close();
    const post = (url: string, headers: Record<string, string>) =>
      fetch(base + url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ uuid: deadUuid }),
      });
    expect((await post('/dashboard/actions/retry', { 'x-q-dashboard': '1', authorization: 'Bearer wrong-token-0123456789' })).status).toBe(401);
    // The token alone is not enough: a cross-site form cannot send the custom header.
    expect((await post('/dashboard/actions/retry', { authorization: `Bearer ${TOKEN}` })).status).toBe(403);
    expect(
      (await post('/dashboard/actions/retry', { 'x-q-dashboard': '1', authorization: `Bearer ${TOKEN}`, origin: 'http://evil.example' })).status,
    ).toBe(403);
    expect((await post('/ro/actions/retry', { 'x-q-dashboard': '1', authorization: `Bearer ${TOKEN}` })).status).toBe(403);
    const { rows } = await schema.pool().query(`SELECT count(*)::int AS n FROM q_jobs WHERE retry_of_id IS NOT NULL`);
    expect(rows[0].n).toBe(0);
    // The read-only dashboard shows no action buttons.
    const ro = await browser.newPage();
    await ro.goto(`${base}/ro/jobs/${deadUuid}`);
    expect(await ro.locator('form[data-action]').count()).toBe(0);
    await ro.close();
  });

  it('retries a dead letter from the page with the token, and the page shows the new job', async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/dashboard/jobs/${deadUuid}`);
    await page.fill('#token', TOKEN);
    await page.click('#job-actions form[data-action="retry"] button');
    await page.waitForSelector('#action-result.ok');
    expect(await page.locator('#action-result').innerText()).toMatch(/retried as job \d+/);
    const { rows } = await schema
      .pool()
      .query<{ uuid: string; status: string }>(
        `SELECT uuid::text AS uuid, status::text AS status FROM q_jobs WHERE retry_of_id = (SELECT id FROM q_jobs_all WHERE uuid = $1)`,
        [deadUuid],
      );
    expect(rows).toEqual([{ uuid: expect.any(String), status: 'queued' }]);
    await page.goto(`${base}/dashboard/jobs?queue=img&status=queued`);
    expect(await page.locator(`#jobs tr[data-uuid="${rows[0]!.uuid}"]`).count()).toBe(1);
    await page.close();
  });

  it('pauses and resumes a schedule from the Schedules page with the token', async () => {
    const state = async () =>
      (
        await schema
          .pool()
          .query<{ paused: boolean; next_fire_at: Date }>(
            `SELECT paused_at IS NOT NULL AS paused, next_fire_at FROM q_schedules WHERE name = 'nightly-report'`,
          )
      ).rows[0]!;
    const page = await browser.newPage();
    await page.goto(`${base}/dashboard/schedules`);
    const row = page.locator('#schedules tr[data-schedule="nightly-report"]');
    expect(await row.locator('td[data-paused]').getAttribute('data-paused')).toBe('no');
    // Without the token: refused, nothing changed.
    await row.locator('form[data-action="pause-schedule"] button').click();
    await page.waitForSelector('#action-result.refused');
    expect((await state()).paused).toBe(false);
    await page.fill('#token', TOKEN);
    await row.locator('form[data-action="pause-schedule"] button').click();
    await page.waitForSelector('#action-result.ok');
    expect(await page.locator('#action-result').innerText()).toBe('paused nightly-report');
    expect((await state()).paused).toBe(true);
    await page.waitForSelector('#schedules tr[data-schedule="nightly-report"] td[data-paused="yes"]');
    const before = Date.now();
    await row.locator('form[data-action="resume-schedule"] button').click();
    await page.waitForSelector('#schedules tr[data-schedule="nightly-report"] td[data-paused="no"]');
    const resumed = await state();
    expect(resumed.paused).toBe(false);
    // Resumed at now: the next tick enqueues no slot of the paused time.
    expect(Math.abs(resumed.next_fire_at.getTime() - before)).toBeLessThan(60_000);
    await page.close();
    const post = (name: unknown) =>
      fetch(`${base}/dashboard/actions/pause-schedule`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-q-dashboard': '1', authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ name }),
      });
    expect((await post('no-such-schedule')).status).toBe(404);
    expect((await post(7)).status).toBe(400);
    expect((await state()).paused).toBe(false);
    // The read-only dashboard shows no pause button.
    const ro = await browser.newPage();
    await ro.goto(`${base}/ro/schedules`);
    expect(await ro.locator('form[data-action]').count()).toBe(0);
    await ro.close();
  });

  it('never shows the DSN password and hides payloads unless asked', async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/ro/jobs/${scriptUuid}`);
    expect(await page.locator('#payload').innerText()).toContain('hidden');
    const password = new URL(schema.dsn).password;
    if (password) expect(await page.content()).not.toContain(password);
    await page.close();
  });
});

describe('actions over HTTP', () => {
  const act = (url: string, action: string, uuid: string, headers: Record<string, string>) =>
    fetch(`${url}/actions/${action}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-q-dashboard': '1', ...headers },
      body: JSON.stringify({ uuid }),
    });
  const status = async (uuid: string) => (await store.get(uuid))?.status;

  it('cancels a queued job and forgets a dead letter with the token; refuses a job in the wrong state', async () => {
    const [queued] = await enqueue('mail', 'send', 1);
    expect((await act(`${base}/dashboard`, 'forget', queued!.uuid, { authorization: `Bearer ${TOKEN}` })).status).toBe(409);
    expect((await act(`${base}/dashboard`, 'cancel', queued!.uuid, { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
    expect(await status(queued!.uuid)).toBe('cancelled');
    const [doomed] = await enqueue('doomed', 'x', 1);
    const [lease] = await store.claim({ queues: ['doomed'], workerId: 'w', limit: 1, leaseMs: 60_000, start: true });
    await store.fail(lease!, 'no', null);
    expect((await act(`${base}/dashboard`, 'forget', doomed!.uuid, { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
    expect(await status(doomed!.uuid)).toBe('cancelled');
    expect((await act(`${base}/dashboard`, 'cancel', 'not-a-uuid', { authorization: `Bearer ${TOKEN}` })).status).toBe(400);
  });

  it('lets an authorize function decide instead of a token', async () => {
    const hooked = await createDashboard({ pool: schema.pool(), actions: { authorize: (req) => req.headers['x-user'] === 'operator' } });
    const srv = http.createServer((req, res) => void hooked.handle(req, res));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
    try {
      const [job] = await enqueue('mail', 'send', 1);
      expect((await act(url, 'cancel', job!.uuid, { 'x-user': 'someone' })).status).toBe(403);
      expect(await status(job!.uuid)).toBe('queued');
      expect((await act(url, 'cancel', job!.uuid, { 'x-user': 'operator' })).status).toBe(200);
      expect(await status(job!.uuid)).toBe('cancelled');
    } finally {
      await new Promise<void>((r) => srv.close(() => r()));
      await hooked.close();
    }
  });

  it('answers a bad filter with 400 and an unknown job with 404', async () => {
    expect((await fetch(`${base}/dashboard/jobs?status=bogus`)).status).toBe(400);
    expect((await fetch(`${base}/dashboard/jobs?before=abc`)).status).toBe(400);
    expect((await fetch(`${base}/dashboard/jobs/00000000-0000-4000-8000-000000000000`)).status).toBe(404);
  });
});

describe('createDashboard options', () => {
  it('refuses bad options with INVALID_ARGUMENT before opening anything', async () => {
    await expect(createDashboard({})).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(createDashboard({ pool: schema.pool(), actions: {} })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(createDashboard({ pool: schema.pool(), actions: { token: 'short' } })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(createDashboard({ pool: schema.pool(), basePath: 'no-slash' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(createDashboard({ dsn: 'postgres://u:secret-pw@127.0.0.1:1/x' })).rejects.not.toThrow(/secret-pw/);
  });
});
