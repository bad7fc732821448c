// endpoint-scrape on a fraction metric (issue #35 item 11): the docs' `vllm:kv_cache_usage_perc`
// example against the simulated model server (own process). A fraction says nothing of what one
// more request adds, so the gate needs `capacity` and counts its own in-flight requests against
// it: with the default 5 s source cache the server stays near the threshold (0.8), where a cached
// reading used to admit every poll for the whole TTL (the server reached 8.0).
import { describe, expect, it } from 'vitest';
import type { TestSchema } from '@q/testing';
import type { RequestStore } from '@q/store';
import { loadConfig } from '../src/config/load.js';
import { Dispatcher } from '../src/service/dispatcher.js';
import type { ModelServerProcess } from '../src/sim/model-server-process.js';
import { configError, Results, submit, useSimulatedServer } from './helpers.js';

let schema: TestSchema;
let server: ModelServerProcess;
let store: RequestStore;
const CAPACITY = 96;
const THRESHOLD = 0.8;

useSimulatedServer('satfrac', CAPACITY, (t) => ({ schema, server, store } = t));

const document = (gateParams: Record<string, unknown>) => ({
  url: schema.dsn,
  lease_ttl_seconds: 5,
  poll_interval_ms: 10,
  batch_size: 32,
  // Able to push the server to twice its capacity: only the gate holds it back.
  concurrency: 2 * CAPACITY,
  result_batch_size: 64,
  max_connections: 8,
  health_port: -1,
  metrics_port: -1,
  // prometheus_cache_ttl_ms left at its default (5 s): the reading is reused for many polls.
  queues: [
    {
      queue_name: 'kv',
      igw_base_url: server.url,
      result_queue_name: 'kv-out',
      gate_type: 'endpoint-scrape',
      gate_params: { url: `${server.url}/metrics`, metric: 'vllm:kv_cache_usage_perc', ...gateParams },
    },
  ],
});

describe('endpoint-scrape on vllm:kv_cache_usage_perc (the docs example)', () => {
  it('without capacity the config is refused: a fraction cannot count the dispatcher’s own requests', () => {
    const err = configError(() => loadConfig({ env: {}, document: document({ baseline: 0.1 }) }));
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain('config: queues[0].gate_params.capacity is required');
  });

  it('with capacity the server stays near the threshold while 1,500 requests drain through a cached reading', async () => {
    const n = 1500;
    const reqs = Array.from({ length: n }, (_, i) => ({ id: `kv-${i}`, deadlineIn: 120 }));
    for (let i = 0; i < n; i += 500) await submit(store, 'kv', 'kv-out', reqs.slice(i, i + 500));
    await server.reset();
    const d = await Dispatcher.start({ config: loadConfig({ env: {}, document: document({ capacity: CAPACITY, threshold: THRESHOLD }) }) });
    try {
      const results = new Results(store, 'kv-out');
      await results.waitFor(
        reqs.map((r) => r.id),
        60_000,
      );
      for (const r of reqs) expect(results.one(r.id)).toMatchObject({ status_code: 200 });
    } finally {
      await d.stop();
    }
    const stats = await server.stats();
    // Own in-flight ÷ capacity never passes the threshold: at most 76 of 96 slots.
    expect(stats.maxSaturation).toBeLessThanOrEqual(THRESHOLD + 0.02);
    // …and the gate does not starve the server either.
    expect(stats.maxSaturation).toBeGreaterThanOrEqual(THRESHOLD - 0.2);
  }, 90_000);
});
