// The `tier-priority` pool's priority header and `lane_objectives` (docs/design/dispatcher.md#headers), seen by a
// loopback endpoint that records headers; and the pool gauges (`…_pool_worker_limit`,
// `…_queue_depth`) and the backlog poll's deadline-proximity buckets, read from `/metrics`.
import { beforeAll, describe, expect, it } from 'vitest';
import type { RequestStore } from '@q/store';
import { loadConfig } from '../src/config/load.js';
import { buildHeaders } from '../src/http/headers.js';
import type { Dispatcher } from '../src/service/dispatcher.js';
import type { Call, InferenceServer } from '../src/sim/server.js';
import { configError, configQueue as queue, Results, scenarioOf, submit, waitFor } from './helpers.js';
import { answerOk, metricsText as metricsOf, useDispatcherEnv } from './support/dispatcher-env.js';

describe('priority header config', () => {
  it('refuses the options outside tier-priority, lanes outside 0..5 and illegal header names or values', () => {
    const bad = (pool: Record<string, unknown>) =>
      configError(() =>
        loadConfig({ env: {}, document: { pools: [{ id: 'p', workers: 1, ...pool }], queues: [{ ...queue, worker_pool_id: 'p' }] } }),
      );
    expect(bad({ priority_header: 'x-p' })).toMatchObject({
      code: 'CONFIG',
      message: 'config: pools[0].priority_header needs merge_policy tier-priority',
    });
    expect(bad({ merge_policy: 'random-robin', lane_objectives: { 0: 'a' } })).toMatchObject({
      code: 'CONFIG',
      message: 'config: pools[0].lane_objectives needs merge_policy tier-priority',
    });
    expect(bad({ merge_policy: 'tier-priority', lane_objectives: { 6: 'a' } })).toMatchObject({
      code: 'CONFIG',
      message: 'config: pools[0].lane_objectives: unknown field "6"',
    });
    expect(bad({ merge_policy: 'tier-priority', lane_objectives: { 1: 'a\nb' } }).code).toBe('CONFIG');
    expect(bad({ merge_policy: 'tier-priority', priority_header: 'x p' }).code).toBe('CONFIG');
    const c = loadConfig({
      env: {},
      document: {
        pools: [{ id: 'p', workers: 1, merge_policy: 'tier-priority', priority_header: '', lane_objectives: { 0: 'gold' } }],
        queues: [{ ...queue, worker_pool_id: 'p' }],
      },
    });
    expect(c.pools?.[0]).toMatchObject({ priority_header: '', lane_objectives: { 0: 'gold' } });
  });

  it('the priority stamp comes after the message headers and the fairness id (later wins)', () => {
    const base = {
      objective: 'std',
      headers: { 'x-gateway-priority': '9', 'x-llm-d-inference-objective': 'mine' },
      fairnessHeader: '',
      fairnessAttribute: 'userid',
    };
    expect(buildHeaders({ ...base, priority: { lane: 2, header: 'x-gateway-priority' } })).toMatchObject({
      'x-gateway-priority': '2',
      'x-llm-d-inference-objective': 'mine',
    });
    const obj = buildHeaders({ ...base, priority: { lane: 0, header: 'x-gateway-priority', objective: 'gold' } });
    expect(obj['x-llm-d-inference-objective']).toBe('gold');
    expect(obj['x-gateway-priority']).toBe('9'); // the message's own header, not the lane
  });
});

describe('tier-priority headers and pool metrics end to end', () => {
  let server: InferenceServer;
  let store: RequestStore;
  let d: Dispatcher | undefined;
  const callOf = (id: string): Call | undefined => server.calls.find((c) => scenarioOf(c).id === id);
  const metricsText = () => metricsOf(d!);
  const env = useDispatcherEnv('tierhdr', { behaviour: answerOk((scenario) => (scenario === 'slow' ? 2500 : 20)) });

  beforeAll(async () => {
    ({ server, store } = env);
    d = await env.start({
      poll_interval_ms: 50,
      metrics_port: 0,
      metrics_backlog_poll_interval_ms: 200,
      prometheus_url: 'http://127.0.0.1:9',
      pools: [
        { id: 'tp', workers: 4, merge_policy: 'tier-priority' },
        { id: 'tpn', workers: 4, merge_policy: 'tier-priority', priority_header: 'X-Prio', lane_objectives: { 0: 'gold' } },
        { id: 'tpoff', workers: 4, merge_policy: 'tier-priority', priority_header: '' },
        { id: 'rr', workers: 3, merge_policy: 'random-robin' },
        { id: 'narrow', workers: 1, merge_policy: 'tier-priority' },
      ],
      queues: [
        { queue_name: 'q-async', igw_base_url: server.url, worker_pool_id: 'tp', labels: { tier: 'async' } },
        {
          queue_name: 'q-gold',
          igw_base_url: server.url,
          worker_pool_id: 'tpn',
          inference_objective: 'std',
          labels: { tier: 'interactive' },
          gates: [{ kind: 'concurrency', limit: 10, gating_mode: 'classifying' }],
        },
        { queue_name: 'q-batch', igw_base_url: server.url, worker_pool_id: 'tpn', inference_objective: 'std', labels: { tier: 'batch' } },
        { queue_name: 'q-off', igw_base_url: server.url, worker_pool_id: 'tpoff', labels: { tier: 'interactive' } },
        { queue_name: 'q-rr', igw_base_url: server.url, worker_pool_id: 'rr', labels: { tier: 'interactive' } },
        { queue_name: 'deep', igw_base_url: server.url, worker_pool_id: 'narrow' },
        // Never sent to the model: its gate queries a Prometheus that is not there (fail closed).
        { queue_name: 'held', igw_base_url: server.url, gate_type: 'prometheus-query', gate_params: { query: 'up' } },
      ],
    });
  });

  it('stamps the lane index, renames or turns the header off per pool, and lane_objectives replaces it', async () => {
    const out = new Results(store, 'hdr-out');
    await submit(store, 'q-async', 'hdr-out', [{ id: 'h-async' }]);
    await submit(store, 'q-gold', 'hdr-out', [{ id: 'h-gold', tenant: 't1' }]);
    await submit(store, 'q-batch', 'hdr-out', [{ id: 'h-batch' }]);
    await submit(store, 'q-off', 'hdr-out', [{ id: 'h-off' }]);
    await submit(store, 'q-rr', 'hdr-out', [{ id: 'h-rr' }]);
    await out.waitFor(['h-async', 'h-gold', 'h-batch', 'h-off', 'h-rr'], 20_000);
    // Unclassified async → lane 4, default header name.
    expect(callOf('h-async')?.headers['x-gateway-priority']).toBe('4');
    // Reserved interactive → lane 0, listed in lane_objectives: the objective, no priority header.
    const gold = callOf('h-gold')!.headers;
    expect(gold['x-llm-d-inference-objective']).toBe('gold');
    expect(gold['x-prio']).toBeUndefined();
    expect(gold['x-gateway-priority']).toBeUndefined();
    // Unlisted lane 5 of the same pool: the renamed header, the queue's objective kept.
    const batch = callOf('h-batch')!.headers;
    expect(batch['x-prio']).toBe('5');
    expect(batch['x-llm-d-inference-objective']).toBe('std');
    expect(batch['x-gateway-priority']).toBeUndefined();
    // Turned off, and random-robin pools: nothing stamped.
    for (const id of ['h-off', 'h-rr']) {
      const h = callOf(id)!.headers;
      expect(h['x-gateway-priority']).toBeUndefined();
      expect(h['x-prio']).toBeUndefined();
    }
  }, 30_000);

  it('publishes each pool’s worker limit and the requests waiting for a pool worker', async () => {
    const text = await metricsText();
    for (const [pool, n] of [
      ['tp', 4],
      ['tpn', 4],
      ['tpoff', 4],
      ['rr', 3],
      ['narrow', 1],
    ] as const) {
      expect(text).toMatch(new RegExp(`llm_d_async_async_pool_worker_limit\\{pool_name="${pool}"[^}]*\\} ${n}\\n`));
    }
    const depthOf = (t: string) => Number(/llm_d_async_async_queue_depth\{[^}]*queue_name="deep"[^}]*\} (\d+)/.exec(t)?.[1] ?? NaN);
    expect(depthOf(text)).toBe(0);
    const out = new Results(store, 'deep-out');
    await submit(store, 'deep', 'deep-out', [{ id: 'deep-0', scenario: 'slow' }]);
    await waitFor(() => callOf('deep-0'), 10_000, 'deep-0 running');
    const rest = Array.from({ length: 4 }, (_, i) => ({ id: `deep-${i + 1}` }));
    await submit(store, 'deep', 'deep-out', rest);
    // The narrow pool's one worker is busy: the four wait in its merged channel.
    await waitFor(async () => depthOf(await metricsText()) === 4, 10_000, 'queue_depth 4');
    await out.waitFor(['deep-0', ...rest.map((r) => r.id)], 20_000);
    await waitFor(async () => depthOf(await metricsText()) === 0, 10_000, 'queue_depth back to 0');
  }, 40_000);

  it('the backlog poll publishes how many pending requests are due within each deadline window', async () => {
    await submit(store, 'held', 'held-out', [
      { id: 'p-2s', deadlineIn: 2 },
      { id: 'p-12s', deadlineIn: 12 },
      { id: 'p-100s', deadlineIn: 100 },
      { id: 'p-3000s', deadlineIn: 3000 },
      { id: 'p-2d', deadlineIn: 2 * 86400 },
    ]);
    const bucket = (t: string, le: string) =>
      Number(
        new RegExp(
          `llm_d_async_async_deadline_proximity_millis_bucket\\{[^}]*queue_name="held"[^}]*le="${le.replace('+', '\\+')}"[^}]*\\} (\\d+)`,
        ).exec(t)?.[1] ?? NaN,
      );
    // Once p-2s's deadline has passed it is answered DEADLINE_EXCEEDED although its queue's gate
    // stays closed (an answer that needs no endpoint call is written whatever the gates say), so
    // it leaves the backlog; the other four stay pending behind the closed gate.
    const out = new Results(store, 'held-out');
    await out.waitFor(['p-2s'], 15_000);
    expect(out.one('p-2s').error_code).toBe('DEADLINE_EXCEEDED');
    expect(out.count).toBe(1);
    const expected: Record<string, number> = {
      '0': 0,
      '1000': 0,
      '5000': 0,
      '15000': 1,
      '30000': 1,
      '60000': 1,
      '120000': 2,
      '300000': 2,
      '600000': 2,
      '1800000': 2,
      '3600000': 3,
      '7200000': 3,
      '21600000': 3,
      '86400000': 3,
      '+Inf': 4,
    };
    const got = await waitFor(
      async () => {
        const t = await metricsText();
        const g = Object.fromEntries(Object.keys(expected).map((le) => [le, bucket(t, le)]));
        return JSON.stringify(g) === JSON.stringify(expected) ? g : undefined;
      },
      10_000,
      'deadline-proximity buckets',
    );
    expect(got).toEqual(expected);
  }, 30_000);
});
