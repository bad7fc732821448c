// The admin API against browser-borne attacks (issue #35 item 15), in every mode: a `Host` that
// does not name the server (DNS rebinding) is refused on every route, a cross-origin write
// (`Origin`, `Sec-Fetch-Site`; a cross-site `text/plain` POST needs no preflight) is refused, and
// clients that are not browsers (no Origin) keep working. Real HTTP (node:http, which lets the test
// set `Host`) and real Postgres. Also: an admin token no Bearer header can carry is refused (#35 item 16).
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isQError } from '@q/schema';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import { parseConfig } from '../src/config.js';
import { hostAllowed } from '../src/api/origin.js';
import { testConfig, TOKEN, TEST_HANDLERS } from './helpers.js';

let schema: TestSchema;
let open: WorkerApp; // --insecure-local
let tokened: WorkerApp; // bearer token

beforeAll(async () => {
  schema = await createTestSchema('akw_origin');
  const parsed = parseConfig(
    ['--dsn', schema.dsn, '--listen', '127.0.0.1:0', '--insecure-local', '--queues', 'notify', '--purge-interval', '0', '--log-level', 'silent'],
    {},
  );
  if (parsed.help) throw new Error('unexpected --help');
  open = await startWorkerApp(parsed.config, { handlers: TEST_HANDLERS });
  tokened = await startWorkerApp(testConfig(schema.dsn, ['--queues', 'notify', '--allowed-hosts', 'admin.internal']), {
    handlers: TEST_HANDLERS,
  });
});
afterAll(async () => {
  await open?.stop();
  await tokened?.stop();
  await schema?.drop();
});

/** One request with exactly these headers (Host included). */
function raw(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; json: { error?: { code: string } } & Record<string, unknown> }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers, setHost: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : {} });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const hostOf = (app: WorkerApp) => new URL(app.url).host;

async function enqueue(app: WorkerApp, auth: Record<string, string>): Promise<string> {
  const r = await raw(
    app.url,
    'POST',
    '/jobs',
    { host: hostOf(app), 'content-type': 'application/json', ...auth },
    JSON.stringify({ type: 'report.build' }),
  );
  expect(r.status).toBe(201);
  return r.json.uuid as string;
}

describe.each([
  ['--insecure-local', () => open, {} as Record<string, string>],
  ['bearer token', () => tokened, { authorization: `Bearer ${TOKEN}` }],
])('admin API (%s)', (_mode, app, auth) => {
  it('refuses a Host that does not name the server (DNS rebinding), on every route', async () => {
    const port = new URL(app().url).port;
    for (const host of [`evil.example:${port}`, `127.0.0.1.evil.example:${port}`, `localhost.:${port}x`]) {
      for (const path of ['/jobs', '/healthz', '/openapi.json']) {
        const r = await raw(app().url, 'GET', path, { host, ...auth });
        expect(r.status, `${host} ${path}`).toBe(403);
        expect(r.json.error?.code).toBe('host_not_allowed');
      }
    }
    // The names of the bound loopback address are fine.
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`]) {
      expect((await raw(app().url, 'GET', '/jobs', { host, ...auth })).status, host).toBe(200);
    }
  });

  it('refuses a cross-site text/plain POST (cancel) and any cross-origin write; same-origin and non-browser writes pass', async () => {
    const uuid = await enqueue(app(), auth);
    const host = hostOf(app());
    const cancel = (headers: Record<string, string>) =>
      raw(app().url, 'POST', `/jobs/${uuid}/cancel`, { host, 'content-type': 'text/plain', ...auth, ...headers }, 'x');
    for (const headers of <Array<Record<string, string>>>[
      { origin: 'http://evil.example' },
      { origin: 'null' },
      { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
      { 'sec-fetch-site': 'cross-site' },
      { origin: `http://${host}.evil.example` },
    ]) {
      const r = await cancel(headers);
      expect(r.status, JSON.stringify(headers)).toBe(403);
      expect(r.json.error?.code).toBe('cross_origin');
    }
    const get = await raw(app().url, 'GET', `/jobs/${uuid}`, { host, ...auth });
    expect(get.json.status).toBe('queued');
    // A cross-origin read gets the usual answer (the browser withholds it: no CORS headers).
    expect((await raw(app().url, 'GET', `/jobs/${uuid}`, { host, origin: 'http://evil.example', ...auth })).status).toBe(200);
    // The page served by this origin, and a client that is no browser, may write.
    const same = await raw(app().url, 'POST', `/jobs/${uuid}/cancel`, {
      host,
      origin: `http://${host}`,
      'sec-fetch-site': 'same-origin',
      ...auth,
    });
    expect(same.status).toBe(202);
    const uuid2 = await enqueue(app(), auth);
    expect((await raw(app().url, 'POST', `/jobs/${uuid2}/cancel`, { host, ...auth })).status).toBe(202);
  });
});

describe('Host names', () => {
  it('--allowed-hosts adds names; a wildcard bind takes any IP literal but no other name', async () => {
    const port = new URL(tokened.url).port;
    expect((await raw(tokened.url, 'GET', '/jobs', { host: `admin.internal:${port}`, authorization: `Bearer ${TOKEN}` })).status).toBe(200);
    const wildcard = hostAllowed({ host: '0.0.0.0', allowedHosts: ['q.example.com'] });
    expect(['10.1.2.3', '::1', 'q.example.com', 'localhost'].map(wildcard)).toEqual([true, true, true, false]);
    expect(['127.0.0.1', 'evil.example'].map(hostAllowed({ host: '10.0.0.5' }))).toEqual([false, false]);
    expect(hostAllowed({ host: '10.0.0.5' })('10.0.0.5')).toBe(true);
  });
});

describe('admin token', () => {
  const refuse = (token: string) => {
    try {
      parseConfig(['--admin-token', token], {});
    } catch (err) {
      expect(isQError(err, 'CONFIG')).toBe(true);
      return (err as Error).message;
    }
    throw new Error(`token ${JSON.stringify(token)} was accepted`);
  };
  it('is refused when a Bearer header could not carry it (blank, tab, control, non-ASCII)', () => {
    for (const t of ['correct horse battery staple', 'tab\tseparated-token-0123', 'ctrl\u0007-token-0123456789', 'tökén-0123456789abcdef']) {
      expect(refuse(t)).toMatch(/printable ASCII without blanks/);
      expect(refuse(t)).not.toContain(t);
    }
  });
});
