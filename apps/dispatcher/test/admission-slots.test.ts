// Admission keeps slots busy at little cost (issue 35 items 12, 13): a gated queue with no
// saturated tenant dispatches each request once; a tenant at its concurrency limit keeps its
// granted slots busy, costs about one dispatch per result, and serves a new urgent request of its
// own before its backlog; forty saturated tenants do not churn the table. Real Postgres, the fake
// endpoint on loopback (each call held `d<ms>` of its scenario).
import { describe, expect, it } from 'vitest';
import { Results, scenarioOf, submit, waitFor } from './helpers.js';
import { answerOk, useDispatcherEnv } from './support/dispatcher-env.js';

const env = useDispatcherEnv('admslots', { behaviour: answerOk((s) => Number(/^d(\d+)$/.exec(s)?.[1] ?? 0)), record: true });

const DOC = {
  poll_interval_ms: 100,
  batch_size: 64,
  concurrency: 64,
  max_connections: 10,
  lease_ttl_seconds: 10,
};

/** Rows stamped by dispatch so far (the attempt sequence) and `q_requests` row updates (after the writers' sessions ended). */
async function counters(): Promise<{ stamps: number; updates: number }> {
  const pool = env.schema.pool();
  const seq = await pool.query<{ n: string }>('SELECT last_value AS n FROM q_dispatch_attempts');
  const upd = await pool.query<{ n: string }>(
    `SELECT coalesce(sum(n_tup_upd), 0) AS n FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'q_requests'`,
    [env.schema.name],
  );
  return { stamps: Number(seq.rows[0]?.n ?? 0), updates: Number(upd.rows[0]?.n ?? 0) };
}

async function submitMany(queue: string, route: string, n: number, tenantOf: (i: number) => string, scenario: string, prefix: string) {
  for (let i = 0; i < n; i += 500) {
    const chunk = Array.from({ length: Math.min(500, n - i) }, (_, k) => ({
      id: `${prefix}-${i + k}`,
      tenant: tenantOf(i + k),
      scenario,
      deadlineIn: 300,
    }));
    await submit(env.store, queue, route, chunk);
  }
}

/** The share of `slots` busy at the server, sampled every 5 ms while `until` is false (from the first call on). */
function sampleBusy(tenants: string[], slots: number): { stop(): number } {
  let samples = 0;
  let sum = 0;
  const t = setInterval(() => {
    let cur = 0;
    for (const x of tenants) cur += env.server.current.get(x) ?? 0;
    if (cur > 0 || samples > 0) {
      samples++;
      sum += cur;
    }
  }, 5);
  return {
    stop() {
      clearInterval(t);
      return sum / Math.max(1, samples) / slots;
    },
  };
}

describe('admission cost and slot use', () => {
  it('a gated queue with no saturated tenant dispatches each request once (no surplus put back)', async () => {
    const N = 600;
    await submitMany('free', 'free-out', N, (i) => `f${i % 20}`, 'd5', 'free');
    const before = await counters();
    const results = new Results(env.store, 'free-out');
    const d = await env.start({
      ...DOC,
      queues: [{ queue_name: 'free', igw_base_url: env.server.url, gates: [{ kind: 'concurrency', limit: 1000, wait_ms: 1000 }] }],
    });
    await results.waitFor(
      Array.from({ length: N }, (_, i) => `free-${i}`),
      60_000,
    );
    await d.stop();
    const after = await counters();
    const perResult = (after.stamps - before.stamps) / N;
    const updates = (after.updates - before.updates) / N;
    console.log(`no saturated tenant: ${perResult.toFixed(2)} dispatches and ${updates.toFixed(2)} row updates per result`);
    // Each row stamped once, and its stamp is its only update (issue 35: 6.3 and 7.5 before).
    expect(perResult).toBeLessThanOrEqual(1.05);
    expect(updates).toBeLessThanOrEqual(1.1);
  }, 90_000);

  it('a tenant at its limit keeps ≥ 85 % of its slots busy at about one dispatch per result', async () => {
    const N = 240;
    const LIMIT = 4;
    await submitMany('sat', 'sat-out', N, () => 'S', 'd200', 'sat');
    const before = await counters();
    const results = new Results(env.store, 'sat-out');
    const d = await env.start({
      ...DOC,
      queues: [{ queue_name: 'sat', igw_base_url: env.server.url, gates: [{ kind: 'concurrency', limit: LIMIT, wait_ms: 1000 }] }],
    });
    await waitFor(() => (env.server.current.get('S') ?? 0) > 0, 20_000, 'first call of S');
    const busy = sampleBusy(['S'], LIMIT);
    await results.waitFor(
      Array.from({ length: N - 2 * LIMIT }, (_, i) => `sat-${i}`),
      60_000,
    );
    const share = busy.stop();
    await results.waitFor(
      Array.from({ length: N }, (_, i) => `sat-${i}`),
      30_000,
    );
    await d.stop();
    const after = await counters();
    const perResult = (after.stamps - before.stamps) / N;
    console.log(`one saturated tenant: slots ${(share * 100).toFixed(0)} % busy, ${perResult.toFixed(2)} dispatches per result`);
    expect(env.server.peak.get('S')).toBe(LIMIT);
    // Issue 35: about 30 % busy and 8.6 dispatches per result before (measured here 0.6 at 200 ms calls).
    expect(share).toBeGreaterThanOrEqual(0.85);
    expect(perResult).toBeLessThanOrEqual(1.2);
  }, 120_000);

  it('one tenant whose limit is the whole concurrency: each request dispatched once (a Batch API backlog)', async () => {
    // The slots the handlers free come back to the tenant's gate a release later, so a poll can
    // find the tenant still full, hold what it read, and read on; what it then reads beyond the
    // poll was put back and dispatched again (1.2 dispatches per result here before, 2.7 in the batch-50k bench).
    const N = 2000;
    await submitMany('one', 'one-out', N, () => 'O', 'd5', 'one');
    const before = await counters();
    const results = new Results(env.store, 'one-out');
    const d = await env.start({
      ...DOC,
      queues: [{ queue_name: 'one', igw_base_url: env.server.url, gates: [{ kind: 'concurrency', limit: 64, wait_ms: 1000 }] }],
    });
    await results.waitFor(
      Array.from({ length: N }, (_, i) => `one-${i}`),
      90_000,
    );
    await d.stop();
    const after = await counters();
    const perResult = (after.stamps - before.stamps) / N;
    console.log(`one tenant at the whole concurrency: ${perResult.toFixed(2)} dispatches per result`);
    expect(env.server.peak.get('O')).toBeLessThanOrEqual(64);
    expect(perResult).toBeLessThanOrEqual(1.1);
  }, 120_000);

  it("a new urgent request of a saturated tenant is served before the tenant's backlog (earliest deadline first)", async () => {
    const LIMIT = 2;
    await submitMany('edf', 'edf-out', 400, () => 'E', 'd100', 'edf');
    const results = new Results(env.store, 'edf-out');
    const d = await env.start({
      ...DOC,
      queues: [{ queue_name: 'edf', igw_base_url: env.server.url, gates: [{ kind: 'concurrency', limit: LIMIT, wait_ms: 1000 }] }],
    });
    await waitFor(() => (env.server.current.get('E') ?? 0) >= LIMIT, 20_000, 'E at its limit');
    await new Promise((r) => setTimeout(r, 1500)); // the backlog is held and parked by now
    // Twenty urgent requests at once: 2 s of the tenant's two slots, well inside their 6 s.
    const URGENT = 20;
    const ids = Array.from({ length: URGENT }, (_, i) => `urgent-${i}`);
    const t0 = Date.now();
    await submit(
      env.store,
      'edf',
      'edf-out',
      ids.map((id) => ({ id, tenant: 'E', scenario: 'd100', deadlineIn: 6 })),
    );
    await results.waitFor(ids, 15_000);
    const calls = ids.map((id) => env.server.calls.find((c) => scenarioOf(c).id === id)?.at ?? Infinity);
    const last = Math.max(...calls) - t0;
    console.log(`20 urgent requests of a saturated tenant: last first call ${last} ms after submit`);
    // Behind 400 requests of 100 ms at 2 slots (20 s of work) they go first, not parked behind
    // the backlog until their deadline (issue 35: 1 in 10 ended DEADLINE_EXCEEDED).
    for (const id of ids) expect(results.one(id)).toMatchObject({ status_code: 200 });
    expect(last).toBeLessThanOrEqual(4000);
    expect(env.server.peak.get('E')).toBe(LIMIT);
    await d.stop();
  }, 90_000);

  it('forty saturated tenants: about one dispatch per result, no parking churn', async () => {
    const T = 40;
    const EACH = 15;
    const tenants = Array.from({ length: T }, (_, i) => `m${i}`);
    await submitMany('many', 'many-out', T * EACH, (i) => tenants[i % T] as string, 'd100', 'many');
    const before = await counters();
    const results = new Results(env.store, 'many-out');
    const d = await env.start({
      ...DOC,
      queues: [{ queue_name: 'many', igw_base_url: env.server.url, gates: [{ kind: 'concurrency', limit: 1, wait_ms: 1000 }] }],
    });
    await results.waitFor(
      Array.from({ length: T * EACH }, (_, i) => `many-${i}`),
      90_000,
    );
    await d.stop();
    const after = await counters();
    const perResult = (after.stamps - before.stamps) / (T * EACH);
    const updates = (after.updates - before.updates) / (T * EACH);
    console.log(`forty saturated tenants: ${perResult.toFixed(2)} dispatches and ${updates.toFixed(2)} row updates per result`);
    for (const t of tenants) expect(env.server.peak.get(t)).toBe(1);
    // Issue 35: 36.5 dispatches and ~78 row updates per result before.
    expect(perResult).toBeLessThanOrEqual(1.3);
    expect(updates).toBeLessThanOrEqual(1.6);
  }, 120_000);
});
