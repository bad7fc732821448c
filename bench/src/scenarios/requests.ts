import { performance } from 'node:perf_hooks';
import type { Scenario, System } from '../scenario.js';
import { ExactlyOnce, check } from '../verify.js';
import { qRunnerRequests, qStoreRequests } from '../systems/q-requests.js';
import { rawSqlRequests } from '../systems/raw-requests.js';
import type { RequestSystem } from '../systems/requests.js';

const BATCH = 1_000;

function asSystem(rs: RequestSystem, run: System['run']): System {
  return { name: rs.name, ...(rs.skip ? { skip: () => (rs.skip as () => Promise<string | undefined>)() } : {}), run };
}

/** Request enqueue in 1,000-row batches. */
export function requestEnqueue(systems: RequestSystem[] = [qStoreRequests(), rawSqlRequests]): Scenario {
  return {
    name: 'request-enqueue',
    title: 'request enqueue, batches of 1,000',
    metrics: [{ key: 'rate', unit: 'req/s', better: 'higher' }],
    baseline: 'q',
    systems: systems.map((rs) =>
      asSystem(rs, async (ctx) => {
        const n = ctx.n(20_000, 2_000);
        const h = await rs.open(ctx.dsn, 2);
        try {
          const t0 = performance.now();
          for (let from = 0; from < n; from += BATCH) await h.enqueue(from, Math.min(BATCH, n - from));
          const s = (performance.now() - t0) / 1000;
          const stored = await h.stored();
          check(stored === n, `${rs.name}: ${stored} requests stored after enqueueing ${n}`);
          return { rate: n / s };
        } finally {
          await h.close();
        }
      }),
    ),
  };
}

/** One dispatch → ack run over `n` pre-enqueued requests; exported for the OpenTelemetry scenario. */
export async function dispatchAckRun(rs: RequestSystem, n: number, runners: number, dsn: string): Promise<{ rate: number }> {
  const h = await rs.open(dsn, runners * 2 + 2);
  try {
    for (let from = 0; from < n; from += BATCH) await h.enqueue(from, Math.min(BATCH, n - from));
    const seen = new ExactlyOnce(n);
    const t0 = performance.now();
    await h.drain({ runners, batch: 256, expected: n, onHandled: (i) => seen.hit(i) });
    const s = (performance.now() - t0) / 1000;
    seen.verify(`${rs.name} dispatch → ack`);
    const results = await h.results();
    const left = await h.stored();
    check(results === n && left === 0, `${rs.name}: ${results} results and ${left} requests left, expected ${n} and 0`);
    return { rate: n / s };
  } finally {
    await h.close();
  }
}

/** Dispatch (batch 256) → no-op handling → ack, with `runners` dispatchers in one process. */
export function requestDispatchAck(runners: number, systems: RequestSystem[] = [qStoreRequests(), qRunnerRequests(), rawSqlRequests]): Scenario {
  return {
    name: `request-dispatch-ack-r${runners}`,
    ...(runners !== 4 ? { smokeCoveredBy: 'request-dispatch-ack-r4' } : {}),
    title: `request dispatch → ack, batch 256, ${runners} runner(s), 20,000 requests`,
    metrics: [{ key: 'rate', unit: 'req/s', better: 'higher' }],
    baseline: 'q',
    systems: systems.map((rs) => asSystem(rs, (ctx) => dispatchAckRun(rs, ctx.n(20_000, 500), runners, ctx.dsn))),
  };
}
