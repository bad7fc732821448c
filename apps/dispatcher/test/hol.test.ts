// No head-of-line blocking across tenants (issue #19): tenant A has 5,000 earlier-deadline
// requests behind a concurrency gate of 2; tenant B's requests, whose gate is open, must start
// within one poll interval while A is throttled. Real Postgres, fake endpoint on loopback.
import { beforeAll, describe, expect, it } from 'vitest';
import type { RequestStore } from '@q/store';
import type { InferenceServer } from '../src/sim/server.js';
import { Results, scenarioOf, submit, waitFor } from './helpers.js';
import { answerOk, useDispatcherEnv } from './support/dispatcher-env.js';

let server: InferenceServer;
let store: RequestStore;
const POLL_MS = 250;
const A_REQUESTS = 5000;
const env = useDispatcherEnv('hol', { behaviour: answerOk(() => 150), record: true });

beforeAll(async () => {
  ({ server, store } = env);
  for (let i = 0; i < A_REQUESTS; i += 1000) {
    await submit(
      store,
      'hol',
      'hol-out',
      Array.from({ length: 1000 }, (_, j) => ({ id: `a-${i + j}`, tenant: 'A', deadlineIn: 100 })),
    );
  }
});

describe('tenants behind one queue', () => {
  it("B's requests start within one poll interval while A's 5,000-request backlog is throttled at 2", async () => {
    await env.start({
      lease_ttl_seconds: 5,
      poll_interval_ms: POLL_MS,
      batch_size: 32,
      concurrency: 32,
      max_connections: 8,
      drain_timeout_ms: 2000,
      queues: [{ queue_name: 'hol', igw_base_url: server.url, gates: [{ kind: 'concurrency', limit: 2, wait_ms: 1000 }] }],
    });
    // A is throttled: its two slots are busy.
    await waitFor(() => (server.current.get('A') ?? 0) >= 2, 20_000, 'A at its limit');
    const aFrom = Date.now();
    await new Promise((r) => setTimeout(r, 1500));
    const results = new Results(store, 'hol-out');
    const waits: number[] = [];
    for (let i = 0; i < 8; i++) {
      const id = `b-${i}`;
      const t0 = Date.now();
      await submit(store, 'hol', 'hol-out', [{ id, tenant: 'B', deadlineIn: 300 }]);
      const call = await waitFor(() => server.calls.find((c) => scenarioOf(c).id === id), 10_000, `first call of ${id}`);
      waits.push(call!.at - t0);
      await new Promise((r) => setTimeout(r, 100));
    }
    console.log(`B: submit → first endpoint call, ms: ${waits.join(', ')} (poll interval ${POLL_MS} ms)`);
    // One poll interval, plus the poll itself on a shared 2-core machine.
    for (const w of waits) expect(w).toBeLessThanOrEqual(POLL_MS + 750);
    await results.waitFor(
      waits.map((_, i) => `b-${i}`),
      15_000,
    );
    for (let i = 0; i < waits.length; i++) expect(results.one(`b-${i}`)).toMatchObject({ status_code: 200 });
    // A kept being served, never above its limit.
    expect(server.peak.get('A')).toBe(2);
    expect(server.calls.filter((c) => c.tenant === 'A').length).toBeGreaterThan(10);
    // ... and kept its two slots busy: parking A's backlog must not starve A itself. Each call
    // takes 150 ms, so two slots allow 2 × elapsed / 150 ms calls. Measured on a loaded 2-core
    // machine: 21 % of that when A's waiters were not admitted, about 50 % now; at least 30 %.
    const elapsed = Date.now() - aFrom;
    const aCalls = server.calls.filter((c) => c.tenant === 'A' && c.at >= aFrom).length;
    console.log(`A: ${aCalls} calls in ${elapsed} ms at limit 2 (capacity ${Math.floor((2 * elapsed) / 150)})`);
    expect(aCalls).toBeGreaterThanOrEqual(0.3 * ((2 * elapsed) / 150));
  }, 55_000);
});
