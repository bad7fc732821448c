// End to end against a model server no one in this project wrote: the OpenAI-compatible mock
// server published on npm as `@dwmkerr/mock-llm` (pinned devDependency), started by the test on
// 127.0.0.1. Its default rule echoes the last user message in a chat completion.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import { Store } from '@q/store';
import { submitRequests } from '../src/client/producer.js';
import { loadConfig } from '../src/config/load.js';
import { Dispatcher } from '../src/service/dispatcher.js';
import { Results, waitFor } from './helpers.js';

let schema: TestSchema;
let store: Store;
let mock: ChildProcess | undefined;
let mockUrl: string;
let tmp: string;
let dispatcher: Dispatcher | undefined;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

beforeAll(async () => {
  schema = await createTestSchema('mockllm');
  store = await Store.open(schema.dsn, { maxConns: 3 });
  const pkg = createRequire(import.meta.url).resolve('@dwmkerr/mock-llm/package.json');
  const main = path.join(path.dirname(pkg), 'dist', 'main.js');
  const port = await freePort();
  // An empty working directory: no mock-llm.yaml, so the server's default (echo) rules apply.
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mock-llm-'));
  mock = spawn(process.execPath, [main], { cwd: tmp, env: { ...process.env, HOST: '127.0.0.1', PORT: String(port) }, stdio: 'ignore' });
  mockUrl = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${mockUrl}/ready`).catch(() => undefined))?.ok, 20_000, 'mock-llm ready');
});

afterAll(async () => {
  await dispatcher?.stop();
  mock?.kill('SIGTERM');
  await store?.close();
  await schema?.drop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

describe('@dwmkerr/mock-llm end to end', () => {
  it('every request gets exactly one result carrying the server’s real chat-completion body', async () => {
    const config = loadConfig({
      env: {},
      document: {
        url: schema.dsn,
        lease_ttl_seconds: 5,
        poll_interval_ms: 100,
        batch_size: 16,
        concurrency: 16,
        max_connections: 6,
        health_port: -1,
        metrics_port: -1,
        queues: [{ queue_name: 'chat', igw_base_url: mockUrl, request_path_url: '/v1/chat/completions', result_queue_name: 'chat-out' }],
      },
    });
    dispatcher = await Dispatcher.start({ config });
    const deadline = Math.floor(Date.now() / 1000) + 60;
    const ids = Array.from({ length: 60 }, (_, i) => `chat-${i}`);
    await submitRequests(
      store,
      ids.map((id) => ({
        id,
        deadline,
        payload: {
          model: 'gpt-4',
          messages: [
            { role: 'system', content: 'be brief' },
            { role: 'user', content: `hello from ${id}` },
          ],
        },
        metadata: { userid: 'tenant-m' },
      })),
      { queue: 'chat', route: 'chat-out' },
    );
    const results = new Results(store, 'chat-out');
    await results.waitFor(ids, 40_000);
    expect(results.count).toBe(ids.length);
    for (const id of ids) {
      const r = results.one(id);
      expect(r.status_code).toBe(200);
      expect(r.error_code).toBeUndefined();
      const body = JSON.parse(r.payload) as { object: string; model: string; choices: Array<{ message: { role: string; content: string } }> };
      expect(body).toMatchObject({ object: 'chat.completion', model: 'gpt-4' });
      expect(body.choices[0]?.message).toEqual({ role: 'assistant', content: `hello from ${id}` });
    }
  }, 55_000);
});
