// Saturation-aware dispatch (issue #19): a simulated model server (own process) whose latency and
// `/metrics` saturation rise with the requests it holds. With an endpoint-scrape gate at
// threshold 0.8 the dispatcher drains 5,000 requests keeping the server's own measured
// saturation ≤ 0.8 + one poll's worth, and interactive requests sent straight to the server keep
// their p99 within 1.5× of the unloaded value. Without the gate the same load is measured too.
import { describe, expect, it } from 'vitest';
import type { TestSchema } from '@q/testing';
import type { RequestStore } from '@q/store';
import { Dispatcher } from '../src/service/dispatcher.js';
import type { ModelServerProcess } from '../src/sim/model-server-process.js';
import { saturationConfig } from '../src/sim/saturation-config.js';
import { Results, submit, useSimulatedServer } from './helpers.js';

let schema: TestSchema;
let server: ModelServerProcess;
let store: RequestStore;
const CAPACITY = 96;
const BATCH = 32;
const THRESHOLD = 0.8;

useSimulatedServer('sat', CAPACITY, (t) => ({ schema, server, store } = t));

async function drain(queue: string, n: number, gated: boolean): Promise<{ maxSaturation: number; p99: number; seconds: number }> {
  const reqs = Array.from({ length: n }, (_, i) => ({ id: `${queue}-${i}`, deadlineIn: 120 }));
  for (let i = 0; i < n; i += 1000) await submit(store, queue, `${queue}-out`, reqs.slice(i, i + 1000));
  const config = saturationConfig({
    dsn: schema.dsn,
    queue,
    serverUrl: server.url,
    capacity: CAPACITY,
    threshold: THRESHOLD,
    gated,
    leaseTtlSeconds: 5,
    batchSize: BATCH,
  });
  await server.reset();
  await server.probeStart(20);
  const t0 = Date.now();
  const d = await Dispatcher.start({ config });
  const results = new Results(store, `${queue}-out`);
  await results.waitFor(
    reqs.map((r) => r.id),
    50_000,
  );
  const seconds = (Date.now() - t0) / 1000;
  const probe = await server.probeStop();
  const stats = await server.stats();
  await d.stop();
  for (const r of reqs) expect(results.one(r.id)).toMatchObject({ status_code: 200 });
  return { maxSaturation: stats.maxSaturation, p99: probe.p99, seconds };
}

describe('endpoint-scrape gate against a saturating model server', () => {
  it('keeps the server under threshold + one poll while draining 5,000 requests; interactive p99 within 1.5×', async () => {
    // Warm up (JIT, connections), then measure the unloaded latency.
    await server.probeStart(20);
    await new Promise((r) => setTimeout(r, 1000));
    await server.probeStop();
    await server.probeStart(20);
    await new Promise((r) => setTimeout(r, 4000));
    const unloaded = await server.probeStop();

    const gated = await drain('sat-gated', 5000, true);
    const ungated = await drain('sat-open', 1500, false);
    console.log(
      `unloaded p99 ${unloaded.p99.toFixed(1)} ms; gated: max saturation ${gated.maxSaturation.toFixed(2)}, p99 ${gated.p99.toFixed(1)} ms ` +
        `(${(gated.p99 / unloaded.p99).toFixed(2)}×), 5000 in ${gated.seconds.toFixed(1)} s; ` +
        `no gate: max saturation ${ungated.maxSaturation.toFixed(2)}, p99 ${ungated.p99.toFixed(1)} ms (${(ungated.p99 / unloaded.p99).toFixed(2)}×), 1500 in ${ungated.seconds.toFixed(1)} s`,
    );
    expect(gated.maxSaturation).toBeLessThanOrEqual(THRESHOLD + BATCH / CAPACITY);
    expect(gated.p99).toBeLessThanOrEqual(1.5 * unloaded.p99);
    // The gate is what held it: without it the same server saturates.
    expect(ungated.maxSaturation).toBeGreaterThan(1);
  }, 58_000);
});
