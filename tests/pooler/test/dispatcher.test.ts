// The reference dispatcher (`q-dispatcher run`, a real process) through PgBouncer in TRANSACTION
// mode, with `pooler: transaction` and a `schema` setting: every store it opens (requests and the
// quota of its concurrency gate) must work there. Issue 35 item 4: it used to answer 8 of 300.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { RequestStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startPgBouncer, type PgBouncer } from '../src/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '../../..');
const cli = path.join(repoRoot, 'apps/dispatcher/src/cli.ts');
const N = 300;

let schema: TestSchema;
let bouncer: PgBouncer;
let admin: pg.Pool;
let endpoint: http.Server;
let endpointUrl: string;
let tmp: string;

beforeAll(async () => {
  schema = await createTestSchema('pool_disp');
  admin = new pg.Pool({ connectionString: schema.serverDsn, max: 2 });
  const server = new URL(schema.serverDsn);
  bouncer = await startPgBouncer({
    serverUrl: schema.serverDsn,
    users: [{ name: decodeURIComponent(server.username), password: decodeURIComponent(server.password) }],
  });
  // An inference endpoint answering every call 200 after 5–25 ms.
  endpoint = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () =>
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ echo: body })), 5 + Math.random() * 20),
    );
  });
  await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
  endpointUrl = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}`;
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'q-pool-disp-'));
});
afterAll(async () => {
  await bouncer?.stop();
  await new Promise((r) => endpoint?.close(r));
  await admin?.end();
  await schema?.drop().catch(() => undefined);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

function startDispatcher(configFile: string): { proc: ChildProcess; err: () => string; exited: Promise<number | null> } {
  const proc = spawn(process.execPath, ['--conditions=q-source', '--import', 'tsx', cli, 'run', '--config', configFile, '--log-format', 'json'], {
    cwd: repoRoot,
    env: { ...process.env, Q_DSN: '', SQL_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stdout!.on('data', () => undefined);
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return { proc, err: () => err, exited };
}

async function waitFor<T>(check: () => Promise<T> | T, timeoutMs: number, what: string): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

it(`q-dispatcher run with pooler: transaction and schema answers all ${N} requests through PgBouncer (quota gate included)`, async () => {
  // The server's own user: its search_path does not name the test schema, so only `schema` finds it.
  const dsn = bouncer.dsn(decodeURIComponent(new URL(schema.serverDsn).username));
  const config = path.join(tmp, 'dispatcher.json');
  fs.writeFileSync(
    config,
    JSON.stringify({
      url: dsn,
      pooler: 'transaction',
      schema: schema.name,
      health_port: -1,
      metrics_port: -1,
      lease_ttl_seconds: 2,
      poll_interval_ms: 100,
      batch_size: 32,
      concurrency: 16,
      max_connections: 4,
      queues: [
        {
          queue_name: 'pooled-disp',
          igw_base_url: endpointUrl,
          result_queue_name: 'pooled-disp-out',
          gates: [{ kind: 'concurrency', limit: 4 }],
        },
      ],
    }),
  );
  const d = startDispatcher(config);
  try {
    await waitFor(() => /"msg":"ready"/.test(d.err()) || d.proc.exitCode !== null, 60_000, 'dispatcher ready');
    expect(d.err()).toMatch(/"msg":"ready"/);
    // Requests as the dispatcher's producer writes them, through the pooler as well.
    const producer = await RequestStore.open(dsn, { maxConns: 2, pooler: 'transaction', schema: schema.name, migrate: false });
    try {
      const deadline = Math.floor(Date.now() / 1000) + 600;
      const rows = Array.from({ length: N }, (_, i) => {
        const id = `pd-${i}`;
        const token = randomBytes(16).toString('hex');
        const internal = {
          request_token: token,
          queue_id: 'pooled-disp',
          request_queue_name: 'pooled-disp',
          result_queue_name: 'pooled-disp-out',
        };
        const data = { id, deadline, metadata: { userid: `tenant-${i % 3}` } };
        return {
          id,
          token,
          queue: 'pooled-disp',
          deadline,
          envelope: JSON.stringify({ internal, request_kind: 'plain', data }),
          payload: Buffer.from(JSON.stringify({ id })),
        };
      });
      for (let i = 0; i < N; i += 100) await producer.enqueue(rows.slice(i, i + 100));
    } finally {
      await producer.close();
    }
    const results = `"${schema.name}".q_results`;
    await waitFor(
      async () => {
        const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${results} WHERE route = 'pooled-disp-out'`);
        return rows[0]!.n >= N;
      },
      120_000,
      `${N} results`,
    );
    const { rows } = await admin.query<{ id: string; payload: string }>(`SELECT id, payload FROM ${results} WHERE route = 'pooled-disp-out'`);
    expect(rows).toHaveLength(N);
    expect(new Set(rows.map((r) => r.id)).size).toBe(N);
    const codes = rows.map((r) => (JSON.parse(r.payload) as { status_code?: number; error_code?: string }).status_code ?? 'error');
    expect(codes.every((c) => c === 200)).toBe(true);
    const errors = d
      .err()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string })
      .filter((l) => l.level >= 50);
    expect(errors).toEqual([]);
    d.proc.kill('SIGTERM');
    expect(await d.exited).toBe(0);
  } finally {
    d.proc.kill('SIGKILL');
  }
}, 240_000);
