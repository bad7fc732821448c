// The gate catalogue (issue #19) against real HTTP sources on loopback: a server speaking the
// Prometheus query API, model servers' `/metrics` pages, and dead ports. Fail-open/closed per
// gate type, formulas, the per-source cache, combinators and tier-priority admission; then a
// dispatcher end to end with a source down.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { createGate, type Gate, type GateMessage, type GateRelease } from '../src/gates/gates.js';
import { GateMetrics } from '../src/gates/metrics.js';
import { MetricSources, parsePrometheusText } from '../src/gates/sources.js';
import { configError, Results, scenarioOf, submit, waitFor } from './helpers.js';
import { answerOk, metricsText, useDispatcherEnv } from './support/dispatcher-env.js';

/** A loopback server: `/api/v1/query` answers from `queries`, `/metrics` serves `page`. */
interface FakeProm {
  url: string;
  queries: Map<string, number | 'error' | 'empty'>;
  seen: string[];
  page: string;
  status: number;
  close(): Promise<void>;
}

async function startProm(): Promise<FakeProm> {
  const f = { queries: new Map(), seen: [] as string[], page: '', status: 200 } as unknown as FakeProm;
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    if (u.pathname === '/metrics') {
      res.writeHead(f.status, { 'content-type': 'text/plain' }).end(f.page);
      return;
    }
    if (u.pathname !== '/api/v1/query') return void res.writeHead(404).end();
    const q = u.searchParams.get('query') ?? '';
    f.seen.push(q);
    const v = f.queries.get(q);
    if (v === 'error' || v === undefined)
      return void res
        .writeHead(v === 'error' ? 500 : 200, { 'content-type': 'application/json' })
        .end(
          JSON.stringify(v === 'error' ? { status: 'error', error: 'boom' } : { status: 'success', data: { resultType: 'vector', result: [] } }),
        );
    if (v === 'empty') return void res.writeHead(200).end(JSON.stringify({ status: 'success', data: { resultType: 'vector', result: [] } }));
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(
        JSON.stringify({ status: 'success', data: { resultType: 'vector', result: [{ metric: {}, value: [Date.now() / 1000, String(v)] }] } }),
      );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  f.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  f.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return f;
}

/** A port nothing listens on. */
async function deadUrl(): Promise<string> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

let prom: FakeProm;
let pods: FakeProm[];
let dead: string;

beforeAll(async () => {
  prom = await startProm();
  pods = [await startProm(), await startProm()];
  dead = await deadUrl();
});
afterAll(async () => {
  await prom?.close();
  for (const p of pods ?? []) await p.close();
});

function build(
  type: string,
  params: Record<string, unknown>,
  opts: { prometheusUrl?: string; ttlMs?: number; metrics?: GateMetrics; now?: () => number } = {},
): Gate {
  const sources = new MetricSources({ ttlMs: opts.ttlMs ?? 0, prometheusUrl: opts.prometheusUrl, now: opts.now });
  return createGate(
    { gate_type: type, gate_params: params },
    { sources, hasPrometheus: opts.prometheusUrl !== undefined, metrics: opts.metrics },
    'queues[0]',
  );
}
const msg = (labels: Record<string, string> = {}): GateMessage => ({ id: 'm', labels });

describe('fail-open / fail-closed when the metric source is down', () => {
  it.each<[string, Record<string, unknown>, number, string]>([
    ['prometheus-saturation', { pool: 'p' }, 1, 'fails open'],
    ['prometheus-saturation', { pool: 'p', fallback: '0.3' }, 0.7, 'fallback is a saturation'],
    ['prometheus-budget', { pool: 'p' }, 0, 'fails closed'],
    ['prometheus-budget', { pool: 'p', fallback: 0.5 }, 0.5, 'fallback is the budget'],
    ['prometheus-query', { query: 'up' }, 0, 'fails closed'],
    ['prometheus-query', { query: 'up', fallback: 0.4 }, 0.4, 'fallback is the budget'],
  ])('%s %j → budget %d (%s)', async (type, params, budget) => {
    const metrics = new GateMetrics(undefined, { queue_id: 'q', queue_name: 'q', pool_name: 'default' });
    const g = build(type, params, { prometheusUrl: dead, metrics });
    expect(await g.budget()).toBeCloseTo(budget, 9);
    expect([...metrics.last.values()][0]?.available).toBe(false);
    expect((await g.apply(msg(), [])).kind).toBe(budget > 0 ? 'continue' : 'refuse');
  });

  it('endpoint-scrape: an unreachable /metrics fails closed (or to its fallback budget); a 500 page too', async () => {
    expect(await build('endpoint-scrape', { url: `${dead}/metrics`, metric: 'vllm:num_requests_running', max_count_per_pod: 10 }).budget()).toBe(
      0,
    );
    expect(await build('endpoint-scrape', { url: `${dead}/metrics`, metric: 'm', capacity: 8, fallback: '0.25' }).budget()).toBe(0.25);
    pods[0]!.status = 500;
    pods[0]!.page = 'm 0\n';
    expect(await build('endpoint-scrape', { url: `${pods[0]!.url}/metrics`, metric: 'm', capacity: 8 }).budget()).toBe(0);
    pods[0]!.status = 200;
  });
});

describe('formulas', () => {
  it('prometheus-saturation: D = 1 − saturation; budget = D − (1 − threshold) above it, else 0', async () => {
    const q = 'inference_extension_flow_control_pool_saturation{inference_pool="pool-a",namespace="ns"}';
    const metrics = new GateMetrics(undefined, { queue_id: 'q', queue_name: 'q', pool_name: 'default' });
    const g = build('prometheus-saturation', { pool: 'pool-a', namespace: 'ns', threshold: 0.8 }, { prometheusUrl: prom.url, metrics });
    prom.queries.set(q, 0.1);
    expect(await g.budget()).toBeCloseTo(0.7, 9);
    expect(metrics.last.get('pool-a')).toMatchObject({ available: true, threshold: 0.8 });
    expect(metrics.last.get('pool-a')?.value).toBeCloseTo(0.9, 9);
    prom.queries.set(q, 0.85);
    expect(await g.budget()).toBe(0);
    expect(prom.seen).toContain(q);
  });

  it('prometheus-budget: the first source with a sample wins; budget = D − baseline', async () => {
    const g = build('prometheus-budget', { pool: 'pb', max_concurrency: 50, baseline: 0.1 }, { prometheusUrl: prom.url });
    prom.seen.length = 0;
    const first =
      '1 - sum(inference_extension_flow_control_queue_size{inference_pool="pb"}) / (sum(inference_pool_ready_pods{inference_pool="pb"}) * 50)';
    const second = '1 - avg(inference_pool_per_pod_queue_size{inference_pool="pb"}) / 50';
    prom.queries.set(first, 'empty');
    prom.queries.set(second, 0.6);
    expect(await g.budget()).toBeCloseTo(0.5, 9);
    expect(prom.seen).toEqual([first, second]);
  });

  it('endpoint-scrape: Σ value ÷ (max_count_per_pod × ready pods), label filter, baseline / threshold, pods metric', async () => {
    pods[0]!.page =
      '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m1"} 6\nvllm:num_requests_running{model_name="other"} 100\nvllm:num_requests_waiting{model_name="m1"} 3\n';
    pods[1]!.page = 'vllm:num_requests_running{model_name="m1"} 2\n';
    const urls = [`${pods[0]!.url}/metrics`, `${pods[1]!.url}/metrics`];
    const base = { url: urls, metric: 'vllm:num_requests_running', labels: { model_name: 'm1' }, max_count_per_pod: 10 };
    // (6 + 2) / (10 × 2 pods) = 0.4
    expect(await build('endpoint-scrape', base).budget()).toBeCloseTo(0.6, 9);
    expect(await build('endpoint-scrape', { ...base, baseline: 0.1 }).budget()).toBeCloseTo(0.5, 9);
    expect(await build('endpoint-scrape', { ...base, url: urls.join(','), threshold: '0.8' }).budget()).toBeCloseTo(0.4, 9);
    // A pod that does not answer is not a ready pod: 6 / (10 × 1).
    expect(await build('endpoint-scrape', { ...base, url: [urls[0], `${dead}/metrics`] }).budget()).toBeCloseTo(0.4, 9);
    // Ready pods from a metric: 8 / (10 × 4).
    prom.page = 'inference_pool_ready_pods{inference_pool="x"} 4\n';
    expect(
      await build('endpoint-scrape', { ...base, pods_url: `${prom.url}/metrics`, pods_metric: 'inference_pool_ready_pods' }).budget(),
    ).toBeCloseTo(0.8, 9);
    // A value that already is a saturation (max_count_per_pod 0): kv-cache usage 0.9 → budget 0.1.
    pods[1]!.page = 'vllm:kv_cache_usage_perc{model_name="m1"} 0.9\n';
    expect(await build('endpoint-scrape', { url: urls[1], metric: 'vllm:kv_cache_usage_perc', capacity: 64 }).budget()).toBeCloseTo(0.1, 9);
  });

  it('endpoint-scrape: requests it let through count until they finish, so a lagging scrape cannot let a burst past the threshold', async () => {
    // The server reports 0 running (the requests have not reached it yet) on every scrape.
    pods[0]!.page = 'vllm:num_requests_running 0\n';
    const g = build('endpoint-scrape', {
      url: `${pods[0]!.url}/metrics`,
      metric: 'vllm:num_requests_running',
      max_count_per_pod: 10,
      threshold: 0.8,
    });
    // 20 handlers ask at once, reading the same figure: the first 7 take the servers to 0.7 and
    // pass; an 8th would reach the threshold.
    const releases: GateRelease[] = [];
    const verdicts = await Promise.all(Array.from({ length: 20 }, () => g.apply(msg(), releases)));
    expect(verdicts.filter((v) => v.kind === 'continue')).toHaveLength(7);
    expect(verdicts.filter((v) => v.kind === 'refuse')).toHaveLength(13);
    expect(releases).toHaveLength(7);
    expect(await g.budget()).toBeCloseTo(0.1, 9);
    // Finished requests free their share (a release run twice frees it once).
    releases[0]!();
    releases[0]!();
    expect(await g.budget()).toBeCloseTo(0.2, 9);
    for (const r of releases.slice(1)) r();
    expect(await g.budget()).toBeCloseTo(0.8, 9);
    // The scrape still counts when it is the larger figure: 9 running of 10.
    pods[0]!.page = 'vllm:num_requests_running 9\n';
    expect(await g.budget()).toBe(0);
    expect((await g.apply(msg(), [])).kind).toBe('refuse');
  });

  it('parses the Prometheus text format (labels with escapes, timestamps, NaN, comments)', () => {
    const s = parsePrometheusText('# HELP x y\nx{a="1",b="q\\"uote"} 3 1700000000\ny NaN\nz +Inf\nbad line\n');
    expect(s).toEqual([
      { name: 'x', labels: { a: '1', b: 'q"uote' }, value: 3 },
      { name: 'y', labels: {}, value: Number.NaN },
      { name: 'z', labels: {}, value: Infinity },
    ]);
  });
});

describe('cache per source', () => {
  it('one fetch per source per prometheus_cache_ttl, shared by the gates reading it; 0 disables it', async () => {
    let now = 1_000_000;
    pods[0]!.page = 'm 1\n';
    const sources = new MetricSources({ ttlMs: 5000, now: () => now });
    const deps = { sources, hasPrometheus: false };
    const a = createGate(
      { gate_type: 'endpoint-scrape', gate_params: { url: `${pods[0]!.url}/metrics`, metric: 'm', max_count_per_pod: 4 } },
      deps,
      'q',
    );
    const b = createGate(
      { gate_type: 'endpoint-scrape', gate_params: { url: `${pods[0]!.url}/metrics`, metric: 'm', max_count_per_pod: 2 } },
      deps,
      'q',
    );
    expect(await a.budget()).toBe(0.75);
    expect(await b.budget()).toBe(0.5);
    expect(sources.fetches).toBe(1);
    pods[0]!.page = 'm 2\n';
    now += 4999;
    expect(await a.budget()).toBe(0.75);
    now += 2;
    expect(await a.budget()).toBe(0.5);
    expect(sources.fetches).toBe(2);
    const uncached = new MetricSources({ ttlMs: 0 });
    const c = createGate(
      { gate_type: 'endpoint-scrape', gate_params: { url: `${pods[0]!.url}/metrics`, metric: 'm', max_count_per_pod: 4 } },
      { sources: uncached, hasPrometheus: false },
      'q',
    );
    await c.budget();
    await c.budget();
    expect(uncached.fetches).toBe(2);
  });
});

describe('combinators and admission gates', () => {
  it('composite: budget is the minimum; a refusal releases the partial grants of earlier gates', async () => {
    prom.queries.set('toggle', 0);
    prom.queries.set('open', 0.7);
    // A limit-1 slot gate, then a Prometheus query gate.
    const slotThenQuery = (query: string) =>
      build(
        'composite',
        {
          gates: [
            { gate_type: 'local-max-concurrency', gate_params: { limit: 1 } },
            { gate_type: 'prometheus-query', gate_params: { query } },
          ],
        },
        { prometheusUrl: prom.url },
      );
    const toggled = slotThenQuery('toggle');
    expect(await toggled.budget()).toBe(0);
    const rel: GateRelease[] = [];
    // Refused by the second gate: the slot the first gate granted goes back at once.
    expect(await toggled.apply(msg(), rel)).toEqual({ kind: 'refuse' });
    expect(rel).toHaveLength(0);
    prom.queries.set('toggle', 1);
    // Had the slot leaked, the limit-1 gate would refuse now.
    expect(await toggled.apply(msg(), rel)).toEqual({ kind: 'continue' });
    expect(rel).toHaveLength(1);
    const open = slotThenQuery('open');
    expect(await open.budget()).toBe(0.7);
    const held: GateRelease[] = [];
    expect(await open.apply(msg(), held)).toEqual({ kind: 'continue' });
    expect(await open.apply(msg(), [])).toEqual({ kind: 'refuse' }); // limit 1 is held
    expect(await open.budget()).toBe(0);
    held.forEach((r) => r());
    expect(await open.apply(msg(), [])).toEqual({ kind: 'continue' });
  });

  it('local-max-concurrency blocking waits for a slot; wait-on-refuse turns Refuse into Wait', async () => {
    const g = build('local-max-concurrency', { limit: 1, gating_mode: 'blocking' });
    const r1: GateRelease[] = [];
    await g.apply(msg(), r1);
    let second = false;
    const p = g.apply(msg(), []).then((v) => ((second = true), v));
    await new Promise((r) => setTimeout(r, 50));
    expect(second).toBe(false);
    r1[0]!();
    expect(await p).toEqual({ kind: 'continue' });
    const w = build('wait-on-refuse', { gate: { gate_type: 'local-max-concurrency', gate_params: { limit: 1 } } });
    await w.apply(msg(), []);
    expect(await w.apply(msg(), [])).toEqual({ kind: 'wait' });
  });

  it('tier-priority-admission: saturated → reserved waits, interactive overflow is shed with a 429 payload, others refused', async () => {
    prom.queries.set('sat', 0);
    prom.queries.set('free', 1);
    const saturated = build(
      'tier-priority-admission',
      { saturation_gate: 'prometheus-query', saturation_gate_params: { query: 'sat' } },
      { prometheusUrl: prom.url },
    );
    expect(await saturated.apply(msg({ classification: 'reserved', tier: 'interactive' }), [])).toEqual({ kind: 'wait' });
    expect(await saturated.apply(msg({ classification: 'reserved', tier: 'batch' }), [])).toEqual({ kind: 'wait' });
    expect(await saturated.apply(msg({ classification: 'overflow', tier: 'interactive' }), [])).toEqual({
      kind: 'drop',
      result: { payload: '{"error":"Too Many Requests","code":429}' },
    });
    expect(await saturated.apply(msg({ classification: 'overflow', tier: 'batch' }), [])).toEqual({ kind: 'refuse' });
    const free = build(
      'tier-priority-admission',
      { saturation_gate: 'prometheus-query', saturation_gate_params: { query: 'free' }, tier_label: 'lane' },
      { prometheusUrl: prom.url },
    );
    expect(await free.apply(msg({ classification: 'overflow', lane: 'interactive' }), [])).toEqual({ kind: 'continue' });
  });
});

describe('configuration', () => {
  const q = { queue_name: 'a', igw_base_url: 'http://127.0.0.1:9/' };
  it.each([
    [{ queues: [{ ...q, gate_type: 'nope' }] }, 'config: queues[0].gate_type must be one of "constant"'],
    [
      { queues: [{ ...q, gate_type: 'prometheus-saturation', gate_params: { pool: 'p' } }] },
      'config: queues[0].gate_type prometheus-saturation needs prometheus_url',
    ],
    [
      { queues: [{ ...q, gate_type: 'endpoint-scrape', gate_params: { url: 'http://h/metrics' } }] },
      'config: queues[0].gate_params.metric is required',
    ],
    [
      { queues: [{ ...q, gate_type: 'endpoint-scrape', gate_params: { url: 'http://h/metrics', metric: 'm', baseline: 2 } }] },
      'config: queues[0].gate_params.baseline must be a number from 0 to 1',
    ],
    [{ queues: [{ ...q, gate_type: 'constant', gate_params: { colour: 1 } }] }, 'config: queues[0].gate_params.colour: unknown parameter'],
    [
      { queues: [{ ...q, gate_type: 'composite', gate_params: { gates: [{ gate_type: 'local-max-concurrency', gate_params: {} }] } }] },
      'config: queues[0].gate_params.gates[0].gate_params.limit is required',
    ],
    [{ prometheus_url: 'ftp://x', queues: [q] }, 'prometheus_url must match pattern'],
  ])('rejects %j naming the field', (doc, message) => {
    const err = configError(() => loadConfig({ env: {}, document: doc }));
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain(message);
  });
});

describe('a dispatcher with a metric source down', () => {
  const env = useDispatcherEnv('gates', { behaviour: answerOk() });

  it('endpoint-scrape (closed) dispatches nothing and counts gate_closed; prometheus-saturation (open) dispatches; gauges exported', async () => {
    const { server, store } = env;
    const d = await env.start({
      batch_size: 8,
      concurrency: 8,
      metrics_port: 0,
      prometheus_url: dead,
      prometheus_cache_ttl_ms: 200,
      queues: [
        {
          queue_name: 'closed',
          igw_base_url: server.url,
          result_queue_name: 'closed-out',
          gate_type: 'endpoint-scrape',
          gate_params: { url: `${dead}/metrics`, metric: 'vllm:num_requests_running', max_count_per_pod: 8, pool: 'pool-c' },
        },
        {
          queue_name: 'open',
          igw_base_url: server.url,
          result_queue_name: 'open-out',
          gate_type: 'prometheus-saturation',
          gate_params: { pool: 'pool-o' },
        },
      ],
    });
    try {
      await submit(store, 'closed', 'closed-out', [{ id: 'c-1' }, { id: 'c-2' }]);
      await submit(store, 'open', 'open-out', [{ id: 'o-1' }, { id: 'o-2' }]);
      const open = new Results(store, 'open-out');
      await open.waitFor(['o-1', 'o-2'], 15_000);
      expect(open.one('o-1')).toMatchObject({ status_code: 200 });
      await waitFor(() => (d.metrics.get('closed')?.tallies.gateDecisions.get('gate_closed') ?? 0) >= 3, 10_000, 'gate_closed decisions');
      expect(server.calls.filter((c) => scenarioOf(c).id.startsWith('c-'))).toHaveLength(0);
      const text = await metricsText(d);
      expect(text).toMatch(/llm_d_async_async_gate_metric_source_available\{[^}]*inference_pool="pool-c"[^}]*\} 0/);
      expect(text).toMatch(/llm_d_async_async_gate_metric_threshold\{[^}]*inference_pool="pool-o"[^}]*\} 0\.8/);
      expect(text).toMatch(/llm_d_async_async_dispatch_budget\{[^}]*queue_name="closed"[^}]*\} 0/);
    } finally {
      await d.stop();
    }
  }, 40_000);
});
