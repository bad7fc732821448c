// The reference dispatcher's admission (issue 35): `pnpm demo` against its gate-bound rate, and
// tenants held at their concurrency limit — how busy their granted slots are kept, and what each
// result costs the request table. q only: the dispatcher is the system under test.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import type { Measurement, RunContext, Scenario } from '../scenario.js';
import { check } from '../verify.js';

// ---- the parts of @q/dispatcher used here (its public API, loaded from its build) ----------
interface DemoSummary {
  results: number;
  throughput: number;
  seconds: number;
}
interface Call {
  at: number;
  tenant: string;
}
interface InferenceServer {
  url: string;
  calls: Call[];
  peak: Map<string, number>;
  current: Map<string, number>;
  close(): Promise<void>;
}
interface DispatcherModule {
  runDemo(opts: Record<string, unknown>): Promise<DemoSummary>;
  loadConfig(opts: { env: Record<string, string>; document: Record<string, unknown> }): unknown;
  Dispatcher: { start(opts: { config: unknown }): Promise<{ stop(): Promise<unknown> }> };
  startInferenceServer(opts: { behaviour: unknown; record?: boolean }): Promise<InferenceServer>;
  simulated(opts: { latencyMs: [number, number]; rate429: number; rate503: number }): unknown;
  submitRequests(store: { enqueue(reqs: never[]): Promise<void> }, raw: unknown[], target: { queue: string; route: string }): Promise<string[]>;
  popResults(store: unknown, route: string, limit: number): Promise<unknown[]>;
}
interface StoreModule {
  // `Store` (the deprecated alias of `RequestStore`), not `RequestStore`: the build measured may be
  // another checkout's (`Q_DISPATCHER_DIST`) from before the rename, and every build has `Store`.
  Store: { open(dsn: string, opts: { maxConns: number }): Promise<{ enqueue(reqs: never[]): Promise<void>; close(): Promise<void> }> };
}

// The build measured: this repository's, or another checkout's (`Q_DISPATCHER_DIST`, e.g. the
// unmodified build a before/after comparison runs first).
const HERE = path.dirname(fileURLToPath(import.meta.url));
function distOf(pkg: 'dispatcher' | 'store'): string {
  const root = process.env.Q_DISPATCHER_DIST ? path.resolve(process.env.Q_DISPATCHER_DIST) : path.resolve(HERE, '../../..');
  return pkg === 'dispatcher' ? path.join(root, 'apps/dispatcher/dist/index.js') : path.join(root, 'packages/store/dist/index.js');
}
async function load<T>(pkg: 'dispatcher' | 'store'): Promise<T> {
  return (await import(pathToFileURL(distOf(pkg)).href)) as T;
}
const skip = async (): Promise<string | undefined> =>
  existsSync(distOf('dispatcher')) ? undefined : `@q/dispatcher is not built (${distOf('dispatcher')})`;

const sink = { write: () => true, isTTY: false } as unknown as NodeJS.WritableStream;

/** `pnpm demo`'s defaults: 3 tenants × 8 slots, 20–80 ms calls, 3 % 429 (Retry-After 1), 2 % 503. */
export function dispatchDemo(): Scenario {
  const tenants = 3;
  const limit = 8;
  const meanMs = 50;
  const bound = (tenants * limit * 1000) / meanMs;
  return {
    name: 'dispatch-demo',
    title: `pnpm demo (2,000 requests, ${tenants} tenants × ${limit} slots, 20–80 ms): results/s over the whole run ÷ the gate-bound ${bound}/s`,
    metrics: [
      { key: 'ratio', unit: 'of gate-bound', better: 'higher' },
      { key: 'rate', unit: 'results/s', better: 'higher' },
    ],
    baseline: 'q',
    maxReps: 3,
    systems: [
      {
        name: 'q',
        skip,
        async run(ctx) {
          const d = await load<DispatcherModule>('dispatcher');
          const requests = ctx.n(2000, 100);
          const s = await d.runDemo({
            requests,
            tenants,
            limit,
            dsn: ctx.dsn,
            latencyMs: [20, 80],
            rate429: 0.03,
            rate503: 0.02,
            concurrency: 64,
            deadlineSeconds: 60,
            out: sink,
          });
          check(s.results === requests, `demo: ${s.results} of ${requests} results`);
          return { ratio: s.throughput / bound, rate: s.throughput };
        },
      },
    ],
  };
}

/**
 * `tenants` tenants, each with a backlog far beyond its concurrency limit `limit` (calls take
 * `latencyMs`): `busy` = the share of the tenants' granted slots in a call, sampled every 5 ms
 * from the first call until the last result (the calls' own time stretches on a loaded machine,
 * so it is read off the server, not computed from the latency); `dispatches` = rows stamped by the request queue's dispatch
 * per result (1 = each request dispatched once); `updates` = `q_requests` row updates per result
 * (stamps, parking, putting back).
 */
export function dispatchSaturated(tenants: number, limit: number, latencyMs: number, perTenant: number): Scenario {
  return {
    name: `dispatch-saturated-t${tenants}`,
    title: `${tenants} saturated tenant(s), concurrency gate ${limit}, ${latencyMs} ms calls, ${perTenant} requests each: granted slots busy, dispatches and row updates per result`,
    metrics: [
      { key: 'busy', unit: 'slots busy', better: 'higher' },
      { key: 'dispatches', unit: 'dispatches/result', better: 'lower' },
      { key: 'updates', unit: 'row updates/result', better: 'lower' },
    ],
    baseline: 'q',
    maxReps: 3,
    systems: [{ name: 'q', skip, run: (ctx) => saturatedRun(ctx, tenants, limit, latencyMs, perTenant) }],
  };
}

async function saturatedRun(ctx: RunContext, tenants: number, limit: number, latencyMs: number, perTenant: number): Promise<Measurement> {
  const d = await load<DispatcherModule>('dispatcher');
  const { Store } = await load<StoreModule>('store');
  const each = ctx.n(perTenant, Math.max(4 * limit, 20));
  const total = each * tenants;
  const sim = await d.startInferenceServer({
    behaviour: d.simulated({ latencyMs: [latencyMs, latencyMs], rate429: 0, rate503: 0 }),
    record: true,
  });
  const producer = await Store.open(ctx.dsn, { maxConns: 2 });
  const db = new pg.Client({ connectionString: ctx.dsn });
  await db.connect();
  let dispatcher: { stop(): Promise<unknown> } | undefined;
  let sampler: NodeJS.Timeout | undefined;
  try {
    const queue = 'bench';
    const route = 'bench-out';
    const deadline = Math.floor(Date.now() / 1000) + 600;
    // Interleaved by tenant, as a mixed backlog arrives.
    for (let i = 0; i < total; i += 1000) {
      const chunk = Array.from({ length: Math.min(1000, total - i) }, (_, k) => ({
        id: `r-${i + k}`,
        created: Math.floor(Date.now() / 1000),
        deadline,
        payload: { model: 'sim', prompt: 'x', max_tokens: 1 },
        metadata: { userid: `t${(i + k) % tenants}` },
      }));
      await d.submitRequests(producer, chunk, { queue, route });
    }
    const before = await counters(db);
    const config = d.loadConfig({
      env: {},
      document: {
        url: ctx.dsn,
        concurrency: 64,
        batch_size: 64,
        poll_interval_ms: 100,
        lease_ttl_seconds: 10,
        max_connections: 12,
        health_port: -1,
        metrics_port: -1,
        queues: [{ queue_name: queue, igw_base_url: sim.url, result_queue_name: route, gates: [{ kind: 'concurrency', limit, wait_ms: 2000 }] }],
      },
    });
    dispatcher = await d.Dispatcher.start({ config });
    let got = 0;
    let samples = 0;
    let busySum = 0;
    sampler = setInterval(() => {
      let cur = 0;
      for (const v of sim.current.values()) cur += v;
      if (cur > 0 || samples > 0) {
        samples++;
        busySum += cur;
      }
    }, 5);
    const giveUp = Date.now() + 300_000;
    while (got < total && Date.now() < giveUp) {
      const rows = await d.popResults(producer, route, 1000);
      got += rows.length;
      if (rows.length === 0) await new Promise((r) => setTimeout(r, 50));
    }
    clearInterval(sampler);
    check(got === total, `saturated: ${got} of ${total} results`);
    await dispatcher.stop(); // closes its connections: their table statistics are flushed
    dispatcher = undefined;
    await new Promise((r) => setTimeout(r, 700));
    const after = await counters(db);
    for (const [t, p] of sim.peak) check(p <= limit, `tenant ${t} reached ${p} concurrent calls, over its limit ${limit}`);
    return {
      busy: busySum / Math.max(1, samples) / (tenants * limit),
      dispatches: (after.stamps - before.stamps) / total,
      updates: (after.updates - before.updates) / total,
    };
  } finally {
    clearInterval(sampler);
    await dispatcher?.stop().catch(() => undefined);
    await db.end().catch(() => undefined);
    await producer.close().catch(() => undefined);
    await sim.close().catch(() => undefined);
  }
}

async function counters(db: pg.Client): Promise<{ stamps: number; updates: number }> {
  const seq = await db.query<{ n: string }>(`SELECT last_value AS n FROM q_dispatch_attempts`);
  const upd = await db.query<{ n: string }>(`SELECT coalesce(sum(n_tup_upd), 0) AS n FROM pg_stat_user_tables WHERE relname = 'q_requests'`);
  return { stamps: Number(seq.rows[0]?.n ?? 0), updates: Number(upd.rows[0]?.n ?? 0) };
}
