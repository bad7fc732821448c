// Dispatcher hardening of issue #35 item 16: a config nested thousands of levels is a `config: …`
// error (exit 2), not a stack trace or an out-of-memory abort; a CR/LF in `inference_objective`
// is refused at load; a response body that stalls until the attempt's bound ends INFERENCE_ERROR
// (it used to be retried into DEADLINE_EXCEEDED); a body that is not UTF-8 is decoded with
// U+FFFD for the bad bytes (the documented behaviour). Real Postgres, real HTTP on loopback, the
// real CLI as a child process.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, MAX_CONFIG_DEPTH } from '../src/config/load.js';
import { InferenceClient } from '../src/http/client.js';
import type { Action } from '../src/sim/server.js';
import { useCliFixture } from './cli-harness.js';
import { configError, configQueue, Results, submit } from './helpers.js';
import { scripted, useDispatcherEnv } from './support/dispatcher-env.js';

const nest = (n: number, leaf: string) => {
  let s = leaf;
  for (let i = 0; i < n; i++) s = `{"a":${s}}`;
  return s;
};

describe('a config nested thousands of levels', () => {
  const cli = useCliFixture();

  it('is `config: …` with exit 2 from the CLI, for JSON and YAML (flow and block)', async () => {
    const queue = `"queues":[{"queue_name":"a","igw_base_url":"http://127.0.0.1:9/","gate_type":"constant","gate_params":`;
    const block = `queues:\n  - queue_name: a\n    igw_base_url: http://127.0.0.1:9/\n    labels:\n${Array.from({ length: 3000 }, (_, i) => `${' '.repeat(6 + i)}a:\n`).join('')}${' '.repeat(3006)}b\n`;
    const files = [
      cli.tmpFile('deep.json', `{${queue}${nest(5000, '1')}}]}`),
      cli.tmpFile('deep-top.yaml', `{"x":${nest(3000, '1')},"queues":[]}`),
      cli.tmpFile('deep-block.yaml', block),
    ];
    // In parallel: each child starts tsx, which takes seconds on a loaded machine.
    const runs = files.map((file) => ({ file, p: cli.startCli(['status', '--config', file, '--dsn', cli.schema.dsn]) }));
    for (const { file, p } of runs) {
      expect(await p.exit, `${file}: ${p.err()}`).toBe(2);
      expect(p.err(), file).toMatch(/config: /);
      expect(p.err(), file).not.toMatch(/RangeError| {4}at |FATAL ERROR|out of memory/);
    }
  }, 120_000);

  it('a tls_ca_file that is not PEM stops `run` at start: config error, exit 2, nothing of the file shown (#35 item 9)', async () => {
    const ca = cli.tmpFile('not-a-ca.pem', 'hunter2 is not a certificate\n');
    const config = cli.tmpFile(
      'tls.yaml',
      `tls_ca_file: ${ca}\nhealth_port: -1\nmetrics_port: -1\nqueues:\n  - { queue_name: tls, igw_base_url: "https://127.0.0.1:9/" }\n`,
    );
    const p = cli.startCli(['run', '--config', config, '--dsn', cli.schema.dsn]);
    expect(await p.exit, p.err()).toBe(2);
    expect(p.err()).toContain('config: tls_ca_file');
    expect(p.err()).not.toContain('hunter2');
  }, 60_000);

  it('loadConfig refuses a deep document or file, and takes a normal one', () => {
    const doc = JSON.parse(
      `{"queues":[{"queue_name":"a","igw_base_url":"http://127.0.0.1:9/","gate_type":"constant","gate_params":${nest(2000, '1')}}]}`,
    ) as Record<string, unknown>;
    expect(configError(() => loadConfig({ env: {}, document: doc })).message).toBe(
      `config: the configuration is nested deeper than ${MAX_CONFIG_DEPTH} levels`,
    );
    expect(() => loadConfig({ env: {}, document: { queues: [{ ...configQueue, labels: { a: 'b' } }] } })).not.toThrow();
  });
});

describe('inference_objective', () => {
  it.each(['chat\r\nx-evil: 1', 'chat\n', '\tchat', 'chat\u0000', 'chät'])('refuses %j at load', (objective) => {
    const err = configError(() => loadConfig({ env: {}, document: { queues: [{ ...configQueue, inference_objective: objective }] } }));
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain('config: queues[0].inference_objective');
  });
  it('takes a header value, or "" (no header)', () => {
    for (const objective of ['chat', 'batch low', '']) {
      expect(
        loadConfig({ env: {}, document: { queues: [{ ...configQueue, inference_objective: objective }] } }).queues[0]?.inference_objective,
      ).toBe(objective);
    }
  });
});

function act(scenario: string, id: string): Action | undefined {
  if (scenario === 'stall') return { status: 200, body: JSON.stringify({ ok: id, pad: 'x'.repeat(200) }), partial: { bytes: 50, then: 'stall' } };
  return undefined;
}

describe('a stalled response body', () => {
  const env = useDispatcherEnv('hard16', { behaviour: scripted(act) });

  it('ends INFERENCE_ERROR ("reading body") when request_timeout_ms cuts it, once, long before the deadline', async () => {
    await env.start({
      request_timeout_ms: 500,
      retry_base_ms: 2000,
      queues: [{ queue_name: 'stall', igw_base_url: env.server.url, result_queue_name: 'stall-out' }],
    });
    const t0 = Date.now();
    await submit(env.store, 'stall', 'stall-out', [{ id: 'st-1', scenario: 'stall', deadlineIn: 6 }]);
    const out = new Results(env.store, 'stall-out');
    await out.waitFor(['st-1'], 20_000);
    const r = out.one('st-1');
    expect(r.status_code).toBeUndefined();
    expect(r).toMatchObject({ error_code: 'INFERENCE_ERROR' });
    expect(r.error_message).toContain('reading body');
    expect(env.callsOf('st-1')).toHaveLength(1);
    expect(Date.now() - t0).toBeLessThan(5000);
  }, 30_000);
});

describe('a body that is not UTF-8', () => {
  let server: http.Server;
  let url: string;
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(Buffer.from([0x41, 0xff, 0xfe, 0x42, 0xc3])));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('is decoded as UTF-8 with U+FFFD for each invalid sequence (docs/dispatcher.md)', async () => {
    const c = new InferenceClient({ requestTimeoutMs: 5000 });
    try {
      const out = await c.send(url, Buffer.from('{}'), {}, Date.now() + 5000);
      expect(out).toMatchObject({ kind: 'success', status: 200, body: 'A\ufffd\ufffdB\ufffd' });
    } finally {
      await c.close();
    }
  });
});
