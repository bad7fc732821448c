// Worker pools, merge policies and pool gates (issue #19): the pool's merge order in isolation,
// then end to end — reserved interactive requests are dispatched before overflow batch ones
// while the pool is saturated, and a pool gate sheds interactive overflow with a 429 payload.
import { beforeAll, describe, expect, it } from 'vitest';
import type { RequestStore } from '@q/store';
import { laneOf, WorkerPool } from '../src/pipeline/pool.js';
import type { Dispatcher } from '../src/service/dispatcher.js';
import type { InferenceServer } from '../src/sim/server.js';
import { Results, scenarioOf, submit, waitFor } from './helpers.js';
import { answerOk, useDispatcherEnv } from './support/dispatcher-env.js';

describe('WorkerPool', () => {
  it('tier-priority: reserved before overflow, interactive < async < batch, round-robin inside a lane', async () => {
    expect([
      laneOf({ classification: 'reserved', tier: 'interactive' }),
      laneOf({ classification: 'reserved', tier: 'batch' }),
      laneOf({ classification: 'overflow', tier: 'interactive' }),
      laneOf({ tier: 'async' }),
      laneOf({}),
    ]).toEqual([0, 2, 3, 4, 5]);
    const pool = new WorkerPool('p', 1, 'tier-priority');
    const first = await pool.acquire('x', {});
    const order: string[] = [];
    const wait = (q: string, labels: Record<string, string>, name: string) =>
      pool.acquire(q, labels).then((release) => {
        order.push(name);
        release();
      });
    const all = [
      wait('bulk', { classification: 'overflow', tier: 'batch' }, 'bulk-overflow'),
      wait('bulk', { classification: 'reserved', tier: 'batch' }, 'bulk-reserved'),
      wait('a', { classification: 'reserved', tier: 'interactive' }, 'a-1'),
      wait('a', { classification: 'reserved', tier: 'interactive' }, 'a-2'),
      wait('b', { classification: 'reserved', tier: 'interactive' }, 'b-1'),
      wait('c', { tier: 'async' }, 'c-async'),
    ];
    expect(pool.waiting).toBe(6);
    first();
    await Promise.all(all);
    expect(order).toEqual(['a-1', 'b-1', 'a-2', 'bulk-reserved', 'c-async', 'bulk-overflow']);
  });

  it('random-robin serves every waiting queue; an aborted wait takes nothing', async () => {
    let r = 0;
    const seq = [0.9, 0.1, 0.9, 0.1];
    const pool = new WorkerPool('p', 1, 'random-robin', () => seq[r++ % seq.length]!);
    const first = await pool.acquire('x', {});
    const order: string[] = [];
    const ac = new AbortController();
    const aborted = pool.acquire('z', {}, ac.signal).then(
      () => 'granted',
      () => 'aborted',
    );
    const waits = ['a', 'a', 'b', 'b'].map((q, i) => pool.acquire(q, {}).then((rel) => (order.push(`${q}${i}`), rel())));
    ac.abort(new Error('stop'));
    expect(await aborted).toBe('aborted');
    first();
    await Promise.all(waits);
    expect(order).toEqual(['b2', 'a0', 'b3', 'a1']);
    expect(pool.busy).toBe(0);
  });
});

describe('pools end to end', () => {
  let server: InferenceServer;
  let store: RequestStore;
  let d: Dispatcher | undefined;
  const env = useDispatcherEnv('pools', { behaviour: answerOk((scenario) => (scenario === 'slow' ? 1200 : 100)) });
  beforeAll(async () => {
    ({ server, store } = env);
    d = await env.start({
      poll_interval_ms: 50,
      pools: [
        { id: 'shared', workers: 1, merge_policy: 'tier-priority' },
        {
          id: 'shed',
          workers: 4,
          gate_type: 'tier-priority-admission',
          gate_params: { saturation_gate: 'local-max-concurrency', saturation_gate_params: { limit: 1 } },
        },
      ],
      queues: [
        {
          queue_name: 'inter',
          igw_base_url: server.url,
          worker_pool_id: 'shared',
          labels: { tier: 'interactive' },
          gates: [{ kind: 'concurrency', limit: 10, gating_mode: 'classifying' }],
        },
        {
          queue_name: 'bulk',
          igw_base_url: server.url,
          worker_pool_id: 'shared',
          labels: { tier: 'batch' },
          gates: [{ kind: 'concurrency', limit: 1, gating_mode: 'classifying' }],
        },
        {
          queue_name: 'shedq',
          igw_base_url: server.url,
          worker_pool_id: 'shed',
          labels: { tier: 'interactive' },
          gates: [{ kind: 'concurrency', limit: 1, gating_mode: 'classifying' }],
        },
      ],
    });
  });

  it('saturated pool: reserved interactive requests go before the overflow batch ones waiting longer', async () => {
    const out = new Results(store, 'result-sql');
    const bulk = Array.from({ length: 6 }, (_, i) => ({ id: `bulk-${i}`, tenant: 'tb', scenario: i === 0 ? 'slow' : 'ok' }));
    await submit(store, 'bulk', 'result-sql', bulk.slice(0, 1));
    await waitFor(() => server.calls.some((c) => scenarioOf(c).id === 'bulk-0'), 10_000, 'bulk-0 running');
    await submit(store, 'bulk', 'result-sql', bulk.slice(1));
    await waitFor(() => (d!.pools.get('shared')?.waiting ?? 0) >= 5, 10_000, 'bulk overflow waiting');
    const inter = Array.from({ length: 3 }, (_, i) => ({ id: `inter-${i}`, tenant: 'ti' }));
    await submit(store, 'inter', 'result-sql', inter);
    await waitFor(() => (d!.pools.get('shared')?.waiting ?? 0) >= 8, 10_000, 'interactive waiting');
    await out.waitFor(
      [...bulk, ...inter].map((r) => r.id),
      30_000,
    );
    const order = server.calls.map((c) => scenarioOf(c).id).filter((id) => /^(bulk|inter)-/.test(id));
    expect(order.slice(0, 4)).toEqual(['bulk-0', 'inter-0', 'inter-1', 'inter-2']);
    expect(order).toHaveLength(9);
  }, 40_000);

  it('a pool gate sheds interactive overflow with the 429 payload and no status (Drop), admits the rest', async () => {
    const out = new Results(store, 'shed-out');
    await submit(store, 'shedq', 'shed-out', [{ id: 'shed-0', tenant: 'ts', scenario: 'slow' }]);
    await waitFor(() => server.calls.some((c) => scenarioOf(c).id === 'shed-0'), 10_000, 'shed-0 running');
    await submit(store, 'shedq', 'shed-out', [
      { id: 'shed-1', tenant: 'ts' },
      { id: 'shed-2', tenant: 'ts' },
    ]);
    await out.waitFor(['shed-0', 'shed-1', 'shed-2'], 20_000);
    expect(out.one('shed-0')).toMatchObject({ status_code: 200 });
    for (const id of ['shed-1', 'shed-2']) {
      const r = out.one(id);
      expect(r).toMatchObject({ payload: '{"error":"Too Many Requests","code":429}' });
      expect(r.status_code).toBeUndefined();
      expect(r.error_code).toBeUndefined();
    }
    expect(server.calls.filter((c) => /^shed-[12]$/.test(scenarioOf(c).id))).toHaveLength(0);
  }, 30_000);
});
