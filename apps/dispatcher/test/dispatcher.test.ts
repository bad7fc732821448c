// The pipeline end to end: real Postgres (own schema), a real fake inference server on loopback,
// one in-process dispatcher serving a fault queue, a concurrency-gated queue and a rate-gated queue.
import { beforeAll, describe, expect, it } from 'vitest';
import type { RequestStore } from '@q/store';
import type { Dispatcher } from '../src/service/dispatcher.js';
import type { Action, InferenceServer } from '../src/sim/server.js';
import { ok, Results, scenarioOf, submit, waitFor } from './helpers.js';
import { metricsText, scripted, useDispatcherEnv } from './support/dispatcher-env.js';

let server: InferenceServer;
let store: RequestStore;
let dispatcher: Dispatcher;
let faults: Results;
let gated: Results;
let rated: Results;

// Per-request scripts, keyed by the payload's `scenario`; `n` is the attempt number from 1 (`ok` and unknown scenarios: `scripted`).
function act(scenario: string, id: string, n: number): Action | undefined {
  switch (scenario) {
    case 'retry-after-seconds':
      return n === 1 ? { status: 429, headers: { 'retry-after': '2' }, body: 'later' } : ok(id);
    case 'retry-after-date':
      return n === 1 ? { status: 429, headers: { 'retry-after': new Date(Date.now() + 3000).toUTCString() }, body: 'later' } : ok(id);
    case '503-twice':
      return n <= 2 ? { status: 503, body: 'busy' } : ok(id);
    case '400':
      return { status: 400, body: `{"error":"bad request ${id}"}` };
    case 'reset':
      return { reset: true };
    case 'slow':
      return { ...ok(id), delayMs: 8000 };
    case 'cancel-during-retry':
      void store.cancel([id]);
      return { status: 503, body: 'busy' };
    case 'gated':
      return ok(id, 150);
    default:
      return undefined;
  }
}

const env = useDispatcherEnv('disp', { behaviour: scripted(act) });
const { callsOf } = env;

beforeAll(async () => {
  ({ server, store } = env);
  faults = new Results(store, 'faults-out');
  gated = new Results(store, 'gated-out');
  rated = new Results(store, 'rated-out');
  // Cancelled before any dispatcher runs.
  await submit(store, 'faults', 'faults-out', [{ id: 'cancel-before' }]);
  await store.cancel(['cancel-before']);
  dispatcher = await env.start({
    lease_ttl_seconds: 3,
    batch_size: 32,
    concurrency: 32,
    max_connections: 8,
    retry_base_ms: 500,
    health_port: 0,
    metrics_port: 0,
    queues: [
      { queue_name: 'faults', igw_base_url: server.url, result_queue_name: 'faults-out' },
      {
        queue_name: 'gated',
        igw_base_url: server.url,
        result_queue_name: 'gated-out',
        gates: [{ kind: 'concurrency', limit: 3, wait_ms: 300 }],
      },
      {
        queue_name: 'rated',
        igw_base_url: server.url,
        result_queue_name: 'rated-out',
        gates: [{ kind: 'rate', limit: 5, window_ms: 60_000, wait_ms: 200 }],
      },
    ],
  });
});

describe('faults and classification', () => {
  it('200 → result with status and raw body; 400 → final result with status and body; reset → INFERENCE_ERROR', async () => {
    await submit(store, 'faults', 'faults-out', [{ id: 'ok-1' }, { id: 'bad-1', scenario: '400' }, { id: 'reset-1', scenario: 'reset' }]);
    await faults.waitFor(['ok-1', 'bad-1', 'reset-1']);
    expect(faults.one('ok-1')).toMatchObject({ id: 'ok-1', status_code: 200, payload: '{"ok":"ok-1"}' });
    expect(faults.one('ok-1').request_token).toMatch(/^[0-9a-f]{32}$/);
    expect(faults.one('bad-1')).toEqual(expect.objectContaining({ status_code: 400, payload: '{"error":"bad request bad-1"}' }));
    expect(faults.one('bad-1').error_code).toBeUndefined();
    expect(faults.one('reset-1')).toMatchObject({ error_code: 'INFERENCE_ERROR' });
    expect(faults.one('reset-1').error_message).toMatch(/^Failed to send request to inference: UNKNOWN: /);
    expect(faults.one('reset-1').status_code).toBeUndefined();
    expect(callsOf('bad-1')).toHaveLength(1);
    expect(callsOf('reset-1')).toHaveLength(1);
  });

  it('429 with Retry-After (seconds and HTTP-date) is retried no sooner than asked, within the deadline', async () => {
    await submit(store, 'faults', 'faults-out', [
      { id: 'ra-s', scenario: 'retry-after-seconds', deadlineIn: 30 },
      { id: 'ra-d', scenario: 'retry-after-date', deadlineIn: 30 },
    ]);
    await faults.waitFor(['ra-s', 'ra-d']);
    expect(faults.one('ra-s')).toMatchObject({ status_code: 200 });
    expect(faults.one('ra-d')).toMatchObject({ status_code: 200 });
    const [s1, s2] = callsOf('ra-s');
    expect(s2!.at - s1!.at).toBeGreaterThanOrEqual(2000 - 20);
    const [d1, d2] = callsOf('ra-d');
    // The HTTP-date has whole seconds: it asked for at least 2 s, at most 3 s.
    expect(d2!.at - d1!.at).toBeGreaterThanOrEqual(2000 - 20);
    expect(d2!.at).toBeLessThan((Math.floor(Date.now() / 1000) + 30) * 1000);
  });

  it('503 → retried with backoff until it succeeds', async () => {
    await submit(store, 'faults', 'faults-out', [{ id: 'busy-1', scenario: '503-twice' }]);
    await faults.waitFor(['busy-1']);
    expect(faults.one('busy-1')).toMatchObject({ status_code: 200 });
    const c = callsOf('busy-1');
    expect(c).toHaveLength(3);
    // base 0.5 s: 1st retry ≥ 0.5 s, 2nd ≥ 1 s after the previous attempt
    expect(c[1]!.at - c[0]!.at).toBeGreaterThanOrEqual(500 - 20);
    expect(c[2]!.at - c[1]!.at).toBeGreaterThanOrEqual(1000 - 20);
  });

  it('slow beyond the deadline → DEADLINE_EXCEEDED', async () => {
    await submit(store, 'faults', 'faults-out', [{ id: 'slow-1', scenario: 'slow', deadlineIn: 3 }]);
    await faults.waitFor(['slow-1']);
    expect(faults.one('slow-1')).toMatchObject({
      error_code: 'DEADLINE_EXCEEDED',
      error_message: 'deadline exceeded',
      payload: '{"error":"deadline exceeded"}',
    });
  });

  it('cancel before dispatch and during retry → CANCELLED', async () => {
    await submit(store, 'faults', 'faults-out', [{ id: 'cancel-retry', scenario: 'cancel-during-retry' }]);
    await faults.waitFor(['cancel-before', 'cancel-retry']);
    expect(faults.one('cancel-before')).toMatchObject({ error_code: 'CANCELLED', error_message: 'cancelled' });
    expect(callsOf('cancel-before')).toHaveLength(0);
    expect(faults.one('cancel-retry')).toMatchObject({ error_code: 'CANCELLED' });
    expect(callsOf('cancel-retry')).toHaveLength(1);
  });
});

describe('gates', () => {
  it('a concurrency gate of 3 per tenant: the endpoint never sees more than 3 of a tenant at once', async () => {
    const reqs = Array.from({ length: 24 }, (_, i) => ({ id: `g-${i}`, scenario: 'gated', tenant: i % 2 ? 'tenant-a' : 'tenant-b' }));
    await submit(store, 'gated', 'gated-out', reqs);
    await gated.waitFor(reqs.map((r) => r.id));
    for (const r of reqs) expect(gated.one(r.id)).toMatchObject({ status_code: 200 });
    expect(server.peak.get('tenant-a')).toBeLessThanOrEqual(3);
    expect(server.peak.get('tenant-b')).toBeLessThanOrEqual(3);
    expect(server.peak.get('tenant-a')).toBeGreaterThanOrEqual(1);
  });

  it('a rate gate: admissions per window never exceed the limit; refused requests wait, never get a gate result', async () => {
    const reqs = Array.from({ length: 9 }, (_, i) => ({ id: `r-${i}`, tenant: 'tenant-r', deadlineIn: 5 }));
    await submit(store, 'rated', 'rated-out', reqs);
    await rated.waitFor(
      reqs.map((r) => r.id),
      60_000,
    );
    const sent = server.calls.filter((c) => c.tenant === 'tenant-r');
    expect(sent).toHaveLength(5); // limit 5 per 60 s window
    const codes = reqs.map((r) => rated.one(r.id).error_code ?? String(rated.one(r.id).status_code));
    expect(codes.filter((c) => c === '200')).toHaveLength(5);
    expect(codes.filter((c) => c === 'DEADLINE_EXCEEDED')).toHaveLength(4);
  });
});

describe('endpoints', () => {
  it('serves /healthz, /readyz and Prometheus /metrics', async () => {
    const h = await fetch(`http://127.0.0.1:${dispatcher.healthPort}/healthz`);
    expect(h.status).toBe(200);
    expect(await h.json()).toEqual({ status: 'ok' });
    const r = await fetch(`http://127.0.0.1:${dispatcher.healthPort}/readyz`);
    expect(await r.json()).toEqual({ status: 'ready' });
    await waitFor(async () => (await metricsText(dispatcher)).includes('llm_d_async_async_request_total'), 10_000, 'metrics');
    const m = await metricsText(dispatcher);
    expect(m).toContain('llm_d_async_async_gate_decisions_total');
  });
});

describe('graceful stop', () => {
  it('stop drains: nothing is left in flight, every request has a result or is pending', async () => {
    const d = await env.start({
      lease_ttl_seconds: 3,
      concurrency: 8,
      batch_size: 8,
      max_connections: 4,
      queues: [{ queue_name: 'drain', igw_base_url: server.url, result_queue_name: 'drain-out' }],
    });
    const out = new Results(store, 'drain-out');
    const reqs = Array.from({ length: 20 }, (_, i) => ({ id: `d-${i}`, scenario: 'gated' }));
    await submit(store, 'drain', 'drain-out', reqs);
    await waitFor(() => server.calls.some((c) => scenarioOf(c).id.startsWith('d-')), 30_000, 'first call');
    await d.stop();
    const { rows } = await env.schema
      .pool()
      .query<{ inflight: string; pending: string }>(
        `SELECT count(*) FILTER (WHERE dispatch_epoch > 0) AS inflight, count(*) FILTER (WHERE dispatch_epoch = 0) AS pending FROM q_requests WHERE queue = 'drain'`,
      );
    await out.drain();
    expect(Number(rows[0]!.inflight)).toBe(0);
    expect(out.count + Number(rows[0]!.pending)).toBe(20);
    // everything the endpoint answered has its result
    for (const c of server.calls.filter((x) => scenarioOf(x).id.startsWith('d-'))) expect(out.byId.has(scenarioOf(c).id)).toBe(true);
  });
});
