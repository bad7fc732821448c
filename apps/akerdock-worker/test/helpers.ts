import { waitFor as poll } from '@q/testing';
import { parseConfig, type WorkerConfig } from '../src/config.js';
import type { HandlerMap } from '../src/handlers/index.js';

/** Admin token used by every test server. */
export const TOKEN = 'test-admin-token-0123456789';
/** Webhook signing key used by every test server. */
export const SECRET = 'test-webhook-secret';

/** A worker config for tests: loopback on a free port, token, short timings. */
export function testConfig(dsn: string, argv: string[] = []): WorkerConfig {
  const r = parseConfig(
    [
      '--dsn',
      dsn,
      '--listen',
      '127.0.0.1:0',
      '--admin-token',
      TOKEN,
      '--webhook-secret',
      SECRET,
      '--purge-cron',
      'off',
      '--log-level',
      'silent',
      '--concurrency',
      '4',
      ...argv,
    ],
    {},
  );
  if (r.help) throw new Error('unexpected --help');
  return r.config;
}

/** Polls `check` until it returns a value other than `undefined`/`false`, or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 60_000,
): Promise<T> {
  return (await poll(check, { timeoutMs, what, everyMs: 50, done: (v) => v !== undefined && v !== false })) as T;
}

/** `fetch` against a test server with the bearer token (unless `token: null`). */
export async function api(
  base: string,
  method: string,
  path: string,
  opts: { body?: unknown; rawBody?: string; token?: string | null; headers?: Record<string, string> } = {},
): Promise<{ status: number; json: unknown; headers: Headers }> {
  const headers: Record<string, string> = { ...opts.headers };
  const token = opts.token === undefined ? TOKEN : opts.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  let body: string | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
  const res = await fetch(new URL(path, base), { method, headers, body });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined, headers: res.headers };
}

/**
 * Handlers of the made-up job types tests enqueue through the admin API, which refuses a type no
 * handler serves. The test workers consume only other queues, so these never run.
 */
export const TEST_HANDLERS: HandlerMap = Object.fromEntries(
  ['x', 'report.build', 'something.else', 'page.test'].map((type) => [type, async () => undefined]),
);
