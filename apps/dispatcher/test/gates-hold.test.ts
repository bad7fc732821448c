// Gates that hold (issue #35, items 8–10): an implausible metric reading makes the source
// unavailable instead of opening the gate; a hanging Prometheus holds a poll one timeout, not one
// per cascade query; metric sources use the dispatcher's TLS options and the credentials of their
// URL; gate types that cannot work as a queue gate are refused. Real servers on loopback (http and
// https with a CA made by `openssl`), real Postgres for the dispatcher runs.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import { RequestStore } from '@q/store';
import { loadConfig, readTlsFiles } from '../src/config/load.js';
import { createGate, type Gate, type GateMessage } from '../src/gates/gates.js';
import { MetricSources } from '../src/gates/sources.js';
import { Dispatcher } from '../src/service/dispatcher.js';
import { configError, Results, submit } from './helpers.js';
import { testDocument } from './support/dispatcher-env.js';
import { makeTestCa } from './support/certs.js';

/** A loopback server: `/metrics` serves `page`; `/api/v1/query` answers `queries` (a query not in it hangs). */
interface Source {
  url: string;
  page: string;
  queries: Map<string, number>;
  auth: Array<string | undefined>;
  close(): Promise<void>;
}

function handler(s: Source): http.RequestListener {
  return (req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    s.auth.push(req.headers.authorization);
    if (u.pathname === '/metrics') return void res.writeHead(200, { 'content-type': 'text/plain' }).end(s.page);
    if (u.pathname === '/api/v1/query') {
      const v = s.queries.get(u.searchParams.get('query') ?? '');
      if (v === undefined) return; // hangs: Prometheus stuck on a query
      const body = { status: 'success', data: { resultType: 'vector', result: [{ metric: {}, value: [Date.now() / 1000, String(v)] }] } };
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    }
    // An inference call (the https endpoint of the TLS run).
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
  };
}

async function listen(server: http.Server | https.Server, s: Source, scheme: string): Promise<Source> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  s.url = `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  s.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return s;
}

const newSource = (): Source => ({ url: '', page: '', queries: new Map(), auth: [], close: async () => undefined });

let src: Source;
let dir: string;
let tlsSrc: Source;
const file = (n: string) => path.join(dir, n);

beforeAll(async () => {
  src = newSource();
  await listen(http.createServer(handler(src)), src, 'http');
  // A CA of the test's own and a server certificate for model.internal (as in tls.test.ts).
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qgates-'));
  makeTestCa(dir);
  fs.writeFileSync(file('not-pem.pem'), 'this is not a certificate\n');
  tlsSrc = newSource();
  const server = https.createServer({ key: fs.readFileSync(file('server.key')), cert: fs.readFileSync(file('server.pem')) }, handler(tlsSrc));
  await listen(server, tlsSrc, 'https');
}, 30_000);

afterAll(async () => {
  await src?.close();
  await tlsSrc?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

function build(type: string, params: Record<string, unknown>, opts: { prometheus?: boolean; sources?: MetricSources } = {}): Gate {
  const sources = opts.sources ?? new MetricSources({ ttlMs: 0, prometheusUrl: src.url });
  return createGate({ gate_type: type, gate_params: params }, { sources, hasPrometheus: opts.prometheus ?? true }, 'queues[0]');
}
const msg: GateMessage = { id: 'm', labels: {} };

describe('implausible readings are "source unavailable" (the fallback applies)', () => {
  it('endpoint-scrape: a negative running count, +Inf / 1e12 / fractional ready pods, a fraction outside [0, 1]', async () => {
    const scrape = { url: `${src.url}/metrics`, metric: 'vllm:num_requests_running', max_count_per_pod: 10, fallback: 0.25 };
    src.page = 'vllm:num_requests_running -40\n';
    expect(await build('endpoint-scrape', scrape).budget()).toBe(0.25);
    expect((await build('endpoint-scrape', { ...scrape, fallback: 0 }).apply(msg, [])).kind).toBe('refuse');
    const withPods = { ...scrape, pods_url: `${src.url}/metrics`, pods_metric: 'ready' };
    for (const pods of ['+Inf', '1e12', '2.5', '-1']) {
      src.page = `vllm:num_requests_running 8\nready ${pods}\n`;
      expect(await build('endpoint-scrape', withPods).budget(), `ready pods ${pods}`).toBe(0.25);
    }
    // Plausible figures still count: 8 running of 10 × 2 pods.
    src.page = 'vllm:num_requests_running 8\nready 2\n';
    expect(await build('endpoint-scrape', withPods).budget()).toBeCloseTo(0.6, 9);
    const kv = { url: `${src.url}/metrics`, metric: 'vllm:kv_cache_usage_perc', capacity: 10, fallback: 0.25 };
    for (const v of ['-0.5', '1.5', 'NaN']) {
      src.page = `vllm:kv_cache_usage_perc ${v}\n`;
      expect(await build('endpoint-scrape', kv).budget(), `kv ${v}`).toBe(0.25);
    }
  });

  it('prometheus-query above 1 or below 0, prometheus-saturation below 0, prometheus-budget headroom above 1', async () => {
    src.queries.set('q_high', 5);
    src.queries.set('q_low', -2);
    expect(await build('prometheus-query', { query: 'q_high', fallback: 0.2 }).budget()).toBe(0.2);
    expect(await build('prometheus-query', { query: 'q_low', fallback: 0.2 }).budget()).toBe(0.2);
    src.queries.set('q_ok', 0.7);
    expect(await build('prometheus-query', { query: 'q_ok', fallback: 0.2 }).budget()).toBeCloseTo(0.7, 9);
    // Saturation −3 would read as D = 4 (wide open): the fallback saturation 0.5 applies instead.
    src.queries.set('inference_extension_flow_control_pool_saturation{inference_pool="ps"}', -3);
    expect(await build('prometheus-saturation', { pool: 'ps', fallback: 0.5 }).budget()).toBeCloseTo(0.5, 9);
    // A headroom above 1 (a negative queue) is skipped for the next source; none plausible → fallback.
    const sel = '{inference_pool="pb"}';
    const cascade = [
      `1 - sum(inference_extension_flow_control_queue_size${sel}) / (sum(inference_pool_ready_pods${sel}) * 10)`,
      `1 - avg(inference_pool_per_pod_queue_size${sel}) / 10`,
      `1 - sum(vllm:num_requests_running) / (sum(inference_pool_ready_pods${sel}) * 10)`,
    ];
    src.queries.set(cascade[0]!, 3);
    src.queries.set(cascade[1]!, 0.55);
    src.queries.set(cascade[2]!, 2);
    expect(await build('prometheus-budget', { pool: 'pb', max_concurrency: 10, baseline: 0.05 }).budget()).toBeCloseTo(0.5, 9);
    src.queries.set(cascade[1]!, 1e9);
    expect(await build('prometheus-budget', { pool: 'pb', max_concurrency: 10, baseline: 0.05, fallback: 0.1 }).budget()).toBe(0.1);
  });

  it('prometheus-budget: a hanging Prometheus holds a poll one 2 s timeout, not 2 s per cascade query', async () => {
    // No query of pool "hang" is answered: each one hangs until its own timeout.
    const g = build('prometheus-budget', { pool: 'hang', fallback: 0.3 });
    const t0 = Date.now();
    expect(await g.budget()).toBe(0.3);
    const ms = Date.now() - t0;
    expect(ms).toBeGreaterThanOrEqual(1900);
    expect(ms).toBeLessThan(3500);
  }, 15_000);
});

describe('metric sources: TLS options and URL credentials', () => {
  const tlsConfig = () => ({ tls_ca_file: file('ca.pem'), tls_server_name: 'model.internal', tls_insecure_skip_verify: false });

  it('an https endpoint-scrape trusts tls_ca_file and expects tls_server_name', async () => {
    tlsSrc.page = 'vllm:num_requests_running 2\n';
    const params = { url: `${tlsSrc.url}/metrics`, metric: 'vllm:num_requests_running', max_count_per_pod: 10, fallback: 0 };
    const tls = readTlsFiles(tlsConfig());
    const trusted = new MetricSources({ ttlMs: 0, ...(tls ? { tls } : {}) });
    expect(await build('endpoint-scrape', params, { sources: trusted }).budget()).toBeCloseTo(0.8, 9);
    await trusted.close();
    // Without them the certificate is not trusted: unavailable, closed.
    expect(await build('endpoint-scrape', params, { sources: new MetricSources({ ttlMs: 0 }) }).budget()).toBe(0);
  });

  it('a tls_ca_file that is not PEM (or a missing one) is refused naming the field, not the content', () => {
    const err = configError(() => readTlsFiles({ ...tlsConfig(), tls_ca_file: file('not-pem.pem') }));
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain('config: tls_ca_file');
    expect(err.message).toContain('must hold PEM certificates');
    expect(err.message).not.toContain('this is not a certificate');
    // A key file given as the CA is no certificate either.
    expect(configError(() => readTlsFiles({ ...tlsConfig(), tls_ca_file: file('server.key') })).message).toContain('config: tls_ca_file');
    expect(
      configError(() => readTlsFiles({ ...tlsConfig(), tls_cert_file: file('ca.pem'), tls_key_file: file('server.key') })).message,
    ).toContain('is not the key of');
    expect(readTlsFiles({ ...tlsConfig(), tls_cert_file: file('server.pem'), tls_key_file: file('server.key') })?.ca).toBeDefined();
  });

  it('credentials in a metrics URL are sent as basic auth, never shown', async () => {
    src.page = 'vllm:num_requests_running 5\n';
    src.auth.length = 0;
    const url = `http://scraper:p%40ss%3Aword@${src.url.slice('http://'.length)}/metrics`;
    const g = build('endpoint-scrape', { url, metric: 'vllm:num_requests_running', max_count_per_pod: 10 });
    expect(await g.budget()).toBeCloseTo(0.5, 9);
    expect(src.auth).toEqual([`Basic ${Buffer.from('scraper:p@ss:word').toString('base64')}`]);
    // prometheus_url too.
    src.auth.length = 0;
    src.queries.set('q_auth', 0.4);
    const prom = new MetricSources({ ttlMs: 0, prometheusUrl: `http://u:secret@${src.url.slice('http://'.length)}` });
    expect(await build('prometheus-query', { query: 'q_auth' }, { sources: prom }).budget()).toBeCloseTo(0.4, 9);
    expect(src.auth).toEqual([`Basic ${Buffer.from('u:secret').toString('base64')}`]);
    // A URL whose credentials cannot be decoded is refused at load without echoing them.
    const err = configError(() =>
      loadConfig({
        env: {},
        document: {
          queues: [
            {
              queue_name: 'a',
              igw_base_url: 'http://127.0.0.1:9/',
              gate_type: 'endpoint-scrape',
              gate_params: { url: 'http://u:s%zzecret@h/metrics', metric: 'm', max_count_per_pod: 1 },
            },
          ],
        },
      }),
    );
    expect(err.message).toContain('config: queues[0].gate_params.url');
    expect(err.message).not.toContain('ecret');
  });
});

describe('gate types that cannot be queue gates', () => {
  const q = { queue_name: 'a', igw_base_url: 'http://127.0.0.1:9/' };
  const wor = { gate_type: 'wait-on-refuse', gate_params: { gate: { gate_type: 'local-max-concurrency', gate_params: { limit: 2 } } } };
  const tpa = {
    gate_type: 'tier-priority-admission',
    gate_params: { saturation_gate: 'local-max-concurrency', saturation_gate_params: { limit: 2 } },
  };
  it.each([
    [wor, 'config: queues[0].gate_type wait-on-refuse cannot be a queue gate'],
    [
      { gate_type: 'composite', gate_params: { gates: [{ gate_type: 'constant' }, wor] } },
      'config: queues[0].gate_params.gates[1].gate_type wait-on-refuse cannot be a queue gate',
    ],
    [tpa, 'config: queues[0].gate_type tier-priority-admission cannot be a queue gate'],
  ])('refuses %j as a queue gate at load', (gate, message) => {
    const err = configError(() => loadConfig({ env: {}, document: { queues: [{ ...q, ...gate }] } }));
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain(message);
  });

  it('accepts them as pool gates', () => {
    for (const gate of [wor, tpa]) {
      expect(() =>
        loadConfig({ env: {}, document: { pools: [{ id: 'p', workers: 2, ...gate }], queues: [{ ...q, worker_pool_id: 'p' }] } }),
      ).not.toThrow();
    }
  });
});

describe('dispatcher runs', () => {
  let schema: TestSchema;
  let store: RequestStore;
  beforeAll(async () => {
    schema = await createTestSchema('gatehold');
    store = await RequestStore.open(schema.dsn, { maxConns: 3 });
  });
  afterAll(async () => {
    await store?.close();
    await schema?.drop();
  });

  it('a queue gate that is wait-on-refuse is refused by Dispatcher.start too (no 12 in flight against a limit of 2)', async () => {
    const config = loadConfig({ env: {}, document: testDocument(schema.dsn, { queues: [{ queue_name: 'w', igw_base_url: src.url }] }) });
    config.queues[0]!.gate_type = 'wait-on-refuse';
    config.queues[0]!.gate_params = { gate: { gate_type: 'local-max-concurrency', gate_params: { limit: 2 } } };
    await expect(Dispatcher.start({ config })).rejects.toThrow(/cannot be a queue gate/);
  });

  it('an endpoint-scrape of the https server the dispatcher calls opens with its TLS options', async () => {
    tlsSrc.page = 'vllm:num_requests_running 0\n';
    const d = await Dispatcher.start({
      config: loadConfig({
        env: {},
        document: testDocument(schema.dsn, {
          tls_ca_file: file('ca.pem'),
          tls_server_name: 'model.internal',
          prometheus_cache_ttl_ms: 100,
          queues: [
            {
              queue_name: 'tls',
              igw_base_url: tlsSrc.url,
              result_queue_name: 'tls-out',
              gate_type: 'endpoint-scrape',
              gate_params: { url: `${tlsSrc.url}/metrics`, metric: 'vllm:num_requests_running', max_count_per_pod: 8 },
            },
          ],
        }),
      }),
    });
    try {
      const ids = ['t-1', 't-2', 't-3'];
      await submit(
        store,
        'tls',
        'tls-out',
        ids.map((id) => ({ id })),
      );
      const results = new Results(store, 'tls-out');
      await results.waitFor(ids, 15_000);
      for (const id of ids) expect(results.one(id)).toMatchObject({ status_code: 200 });
    } finally {
      await d.stop();
    }
  }, 40_000);
});
