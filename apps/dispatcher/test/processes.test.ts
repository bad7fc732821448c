// The CLI as child processes: two dispatchers with one SIGKILLed mid-run, a bad config, and the
// embedded-default demo on a small batch.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import { Store } from '@q/store';
import { startInferenceServer, type InferenceServer } from '../src/sim/server.js';
import { ok, Results, scenarioOf, submit, waitFor } from './helpers.js';

const appDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cli = path.join(appDir, 'src', 'cli.ts');
let tmp: string;
let schema: TestSchema;
let server: InferenceServer;
let store: Store;
const children: ChildProcess[] = [];

function startCli(args: string[], env: NodeJS.ProcessEnv = {}): { child: ChildProcess; out: () => string; err: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, ['--conditions=q-source', '--import', 'tsx', cli, ...args], {
    cwd: appDir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out: () => out, err: () => err, exit };
}

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'qdisp-'));
  schema = await createTestSchema('dproc');
  server = await startInferenceServer({ behaviour: (call) => ok(scenarioOf(call).id, 40 + Math.random() * 80) });
  store = await Store.open(schema.dsn, { maxConns: 2 });
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await store?.close();
  await server?.close();
  await schema?.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('two dispatcher processes', () => {
  it('one SIGKILLed mid-run: every request ends with exactly one result', async () => {
    const cfg = path.join(tmp, 'two.json');
    fs.writeFileSync(
      cfg,
      JSON.stringify({
        url: schema.dsn,
        lease_ttl_seconds: 2,
        poll_interval_ms: 100,
        concurrency: 8,
        batch_size: 8,
        max_connections: 4,
        health_port: -1,
        metrics_port: -1,
        queues: [{ queue_name: 'crash', igw_base_url: server.url, result_queue_name: 'crash-out' }],
      }),
    );
    const a = startCli(['run', '--config', cfg, '--log-level', 'warn']);
    const b = startCli(['run', '--config', cfg, '--log-level', 'warn']);
    const ids = Array.from({ length: 120 }, (_, i) => `k-${i}`);
    await submit(store, 'crash', 'crash-out', ids.map((id) => ({ id })));
    const results = new Results(store, 'crash-out');
    await waitFor(async () => {
      await results.drain();
      return results.count >= 30;
    }, 60_000, '30 results');
    a.child.kill('SIGKILL');
    await a.exit;
    await results.waitFor(ids, 90_000);
    await new Promise((r) => setTimeout(r, 500));
    await results.drain();
    expect(results.count).toBe(ids.length);
    for (const id of ids) expect(results.one(id)).toMatchObject({ status_code: 200 });
    b.child.kill('SIGTERM');
    expect(await b.exit).toBe(0);
    const { rows } = await schema.pool().query<{ n: string }>(`SELECT count(*) AS n FROM async_requests WHERE queue = 'crash'`);
    expect(Number(rows[0]!.n)).toBe(0);
  }, 150_000);
});

describe('CLI', () => {
  it('a bad config is refused with a clear error naming the field', async () => {
    const cfg = path.join(tmp, 'bad.yaml');
    fs.writeFileSync(cfg, 'queues:\n  - queue_name: q\n    igw_base_url: http://127.0.0.1:1\n    gates:\n      - kind: concurrency\n        limit: -2\n');
    const p = startCli(['run', '--config', cfg]);
    expect(await p.exit).toBe(2);
    expect(p.err()).toContain('config: queues[0].gates[0].limit must be >= 1');
  }, 90_000);

  it('submit, status and cancel against a database', async () => {
    const file = path.join(tmp, 'reqs.jsonl');
    const deadline = Math.floor(Date.now() / 1000) + 600;
    fs.writeFileSync(file, [1, 2, 3].map((i) => JSON.stringify({ id: `cli-${i}`, deadline, payload: { prompt: i } })).join('\n') + '\n');
    const env = { Q_DSN: schema.dsn };
    const s = startCli(['submit', '--queue', 'cliq', '--route', 'cli-out', '--file', file], env);
    expect(await s.exit).toBe(0);
    expect(s.out()).toContain('submitted 3 requests to queue cliq');
    const st = startCli(['status', '--queue', 'cliq', '--route', 'cli-out', '--json'], env);
    expect(await st.exit).toBe(0);
    expect(JSON.parse(st.out())[0]).toMatchObject({ queue: 'cliq', backlog: 3, resultsWaiting: 0 });
    const c = startCli(['cancel', 'cli-1'], env);
    expect(await c.exit).toBe(0);
    const { rows } = await schema.pool().query<{ n: string }>(`SELECT count(*) AS n FROM async_requests WHERE queue = 'cliq' AND cancelled <> 0`);
    expect(Number(rows[0]!.n)).toBe(1);
  }, 150_000);
});

describe('embedded default', () => {
  it('demo runs to completion on the embedded Postgres and prints the summary', async () => {
    const p = startCli(['demo', '--requests', '60', '--data-dir', path.join(tmp, 'pgdata'), '--rate-429', '0', '--rate-503', '0.05']);
    const code = await p.exit;
    if (code !== 0) throw new Error(`demo exited ${code}: ${p.err().slice(-2000)}`);
    expect(p.out()).toMatch(/\| results\s+\| 60\s+\|/);
    expect(p.out()).toMatch(/peak concurrency tenant-a\s+\| \d \/ limit 8/);
  }, 180_000);
});
