// The budget gates of docs/design/dispatcher.md#gates (constant, endpoint-scrape, prometheus-query,
// -saturation, -budget): each turns one metric read into the fraction of a poll's batch that may be
// dispatched. They share `metered` (fallback + gauges), which is why they live together, apart
// from the per-message admission gates.
import type { Params } from './params.js';
import { bad, needsPrometheus } from './params.js';
import { sumMatching } from './sources.js';
import { CONTINUE, clamp, type Gate, type GateDeps } from './types.js';

function selector(labels: Record<string, string>): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}

/** A budget gate's default `apply` (docs/design/dispatcher.md#gates): budget ≤ 0 → Refuse, else Continue. */
export function budgetGate(budget: () => Promise<number>): Gate {
  return {
    budget,
    async apply() {
      return (await budget()) <= 0 ? { kind: 'refuse' } : CONTINUE;
    },
  };
}

/**
 * One metric read for a budget gate: D, or undefined when the source fails or gives no number.
 * Publishes value, threshold and source availability.
 */
function meteredRead(deps: GateDeps, pool: string, threshold: number, read: () => Promise<number>): () => Promise<number | undefined> {
  deps.metrics?.threshold(pool, threshold);
  return async () => {
    try {
      const d = await read();
      if (!Number.isFinite(d)) throw new Error('no number');
      deps.metrics?.value(pool, d, true);
      return d;
    } catch {
      deps.metrics?.value(pool, undefined, false);
      return undefined;
    }
  };
}

/**
 * A budget gate over one metric: `read()` gives D, `toBudget(D)` the budget; a failing read gives
 * `fallback`. Publishes value, threshold and source availability.
 */
function metered(
  deps: GateDeps,
  pool: string,
  threshold: number,
  read: () => Promise<number>,
  toBudget: (d: number) => number,
  fallback: number,
): Gate {
  const d = meteredRead(deps, pool, threshold, read);
  return budgetGate(async () => {
    const v = await d();
    return v === undefined ? clamp(fallback) : toBudget(v);
  });
}

/** `prometheus-query`: the query's value is the budget itself. */
export function prometheusQuery(p: Params, deps: GateDeps, at: string): Gate {
  needsPrometheus(deps, at, 'prometheus-query');
  const query = p.str('query');
  const fallback = p.num('fallback', 0, 0, 1);
  const pool = p.str('pool', '');
  // A failing query falls back to `fallback` (closed by default).
  return metered(
    deps,
    pool,
    0,
    async () => deps.sources.query(query),
    (d) => clamp(d),
    fallback,
  );
}

/** `prometheus-saturation`: budget = the pool's headroom above `threshold`. */
export function prometheusSaturation(p: Params, deps: GateDeps, at: string): Gate {
  needsPrometheus(deps, at, 'prometheus-saturation');
  const pool = p.str('pool');
  const ns = p.str('namespace', '');
  const threshold = p.num('threshold', 0.8, 0, 1);
  // `fallback` is a saturation: the default 0 fails open (budget 1).
  const fallback = p.num('fallback', 0, 0, 1);
  const sel = selector({ inference_pool: pool, ...(ns ? { namespace: ns } : {}) });
  const headroom = 1 - threshold;
  return metered(
    deps,
    pool,
    threshold,
    async () => 1 - (await deps.sources.query(`inference_extension_flow_control_pool_saturation${sel}`)),
    (d) => (d > headroom ? clamp(d - headroom) : 0),
    1 - fallback,
  );
}

/** `endpoint-scrape`: saturation from the model servers' own `/metrics` pages. */
export function endpointScrape(p: Params, deps: GateDeps): Gate {
  const urls = p.urls('url', true);
  const metric = p.str('metric');
  const labels = p.labels('labels');
  const maxPerPod = p.num('max_count_per_pod', 0, 0);
  if (p.p.baseline !== undefined && p.p.threshold !== undefined)
    throw bad(p.at, 'baseline and threshold are exclusive (baseline = 1 - threshold)');
  // `threshold` is the saturation at which the budget reaches 0 (a convenience for 1 − baseline).
  const baseline = p.p.threshold !== undefined ? 1 - p.num('threshold', 1, 0, 1) : p.num('baseline', 0, 0, 1);
  // `fallback` is the budget used when no server can be read: 0 fails closed.
  const fallback = p.num('fallback', 0, 0, 1);
  const podsUrls = p.urls('pods_url', false);
  const podsMetric = podsUrls.length ? p.str('pods_metric') : '';
  const podsLabels = p.labels('pods_labels');
  const pool = p.str('pool', '');
  /** Slots of the servers at the last read (max_count_per_pod × ready pods); undefined: unknown. */
  let capacity: number | undefined;
  /** Saturation = Σ value ÷ (max_count_per_pod × ready pods); 0 = the value already is one. */
  const read = async (): Promise<number> => {
    const pages = await Promise.allSettled(urls.map((u) => deps.sources.scrape(u)));
    let sum: number | undefined;
    let answered = 0;
    for (const pg of pages) {
      if (pg.status !== 'fulfilled') continue;
      const v = sumMatching(pg.value, metric, labels);
      if (v === undefined) continue;
      answered++;
      sum = (sum ?? 0) + v;
    }
    if (sum === undefined) throw new Error('no server reported the metric');
    if (maxPerPod === 0) {
      capacity = undefined;
      return answered > 1 ? sum / answered : sum;
    }
    let pods = answered;
    if (podsUrls.length) {
      const pp = await Promise.allSettled(podsUrls.map((u) => deps.sources.scrape(u)));
      let n: number | undefined;
      for (const x of pp) if (x.status === 'fulfilled') n = (n ?? 0) + (sumMatching(x.value, podsMetric, podsLabels) ?? 0);
      if (n === undefined) throw new Error('ready pods unavailable');
      pods = n;
    }
    if (pods <= 0) {
      capacity = undefined;
      return 1; // no ready pod: saturated
    }
    capacity = maxPerPod * pods;
    return sum / capacity;
  };
  const saturation = meteredRead(deps, pool, 1 - baseline, read);
  // A scrape lags the requests this dispatcher has just sent: those admitted on the same page
  // (polls and handlers that read it together) or still on their way to the server are not in it
  // yet, and each of them would pass the threshold on the old figure; the saturation then
  // overshot the threshold by a batch or more. So the gate counts the requests it let through
  // until they finish, and takes the saturation as at least what they alone make: its own traffic
  // never takes the servers past the threshold, whatever the scrape's lag. (Other clients'
  // traffic shows in the scrape; taking the larger figure never undercounts either.)
  let ownInFlight = 0;
  const budgetAt = (sat: number | undefined, extra: number): number => {
    if (sat === undefined) return clamp(fallback);
    const own = capacity === undefined ? 0 : (ownInFlight + extra) / capacity;
    return clamp(1 - Math.max(sat, own) - baseline);
  };
  return {
    budget: async () => budgetAt(await saturation(), 0),
    async apply(_msg, releases) {
      // Check and count in one step after the read: concurrent applies cannot both take the last slot.
      if (budgetAt(await saturation(), 1) <= 0) return { kind: 'refuse' };
      if (capacity !== undefined) {
        ownInFlight++;
        let released = false;
        releases.push(() => {
          if (released) return;
          released = true;
          ownInFlight--;
        });
      }
      return CONTINUE;
    },
  };
}

/** `prometheus-budget`: headroom from a cascade of queries, the first one answering wins. */
export function prometheusBudget(p: Params, deps: GateDeps, at: string): Gate {
  needsPrometheus(deps, at, 'prometheus-budget');
  const pool = p.str('pool');
  const ns = p.str('namespace', '');
  const maxc = p.num('max_concurrency', 100, Number.MIN_VALUE);
  const baseline = p.num('baseline', 0.05, 0, 0.999999);
  // All sources failing → `fallback` as the budget: 0 fails closed.
  const fallback = p.num('fallback', 0, 0, 1);
  const sel = selector({ inference_pool: pool, ...(ns ? { namespace: ns } : {}) });
  const cascade = [
    `1 - sum(inference_extension_flow_control_queue_size${sel}) / (sum(inference_pool_ready_pods${sel}) * ${maxc})`,
    `1 - avg(inference_pool_per_pod_queue_size${sel}) / ${maxc}`,
    `1 - sum(vllm:num_requests_running) / (sum(inference_pool_ready_pods${sel}) * ${maxc})`,
  ];
  const read = async (): Promise<number> => {
    for (const q of cascade) {
      try {
        return await deps.sources.query(q);
      } catch {
        /* next source */
      }
    }
    throw new Error('every source failed');
  };
  return metered(deps, pool, baseline, read, (d) => (d > baseline ? clamp(d - baseline) : 0), fallback);
}
