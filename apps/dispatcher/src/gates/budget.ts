// The budget gates of docs/design/dispatcher.md#gates (constant, endpoint-scrape, prometheus-query,
// -saturation, -budget): each turns one metric read into the fraction of a poll's batch that may be
// dispatched, through the `metered` wrapper they share (fallback + gauges). The per-message
// admission gates are in message-gates.ts.
import type { Params } from './params.js';
import { bad, needsPrometheus } from './params.js';
import { SOURCE_TIMEOUT_MS, sumMatching } from './sources.js';
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
 * A reading outside the range its metric can have (a negative count, a fraction above 1, +Inf
 * ready pods) is a broken or lying source, not a figure to act on: it makes the source
 * unavailable, so the gate's fallback applies instead of the reading opening the gate.
 */
export class ImplausibleReading extends Error {}

/** Throws {@link ImplausibleReading} unless `v` is a finite number in [min, max]. */
export function plausible(what: string, v: number, min: number, max: number): number {
  if (!Number.isFinite(v) || v < min || v > max) throw new ImplausibleReading(`${what} ${v} is outside [${min}, ${max}]`);
  return v;
}

/** Most ready pods a pool can plausibly report; more is a broken source. */
const MAX_PODS = 100_000;

/** Rejects after `ms` (one poll's bound of a metric read), never keeping the process alive. */
function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`metric read took over ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/**
 * One metric read for a budget gate: D, or undefined when the source fails, gives no number or an
 * implausible one, or takes longer than {@link SOURCE_TIMEOUT_MS}. Publishes value, threshold and
 * source availability.
 */
function meteredRead(deps: GateDeps, pool: string, threshold: number, read: () => Promise<number>): () => Promise<number | undefined> {
  deps.metrics?.threshold(pool, threshold);
  return async () => {
    try {
      const d = await within(SOURCE_TIMEOUT_MS, read());
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
  // The value is a budget: outside [0, 1] the query is wrong, not the servers idle.
  return metered(
    deps,
    pool,
    0,
    async () => plausible('prometheus-query value', await deps.sources.query(query), 0, 1),
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
    async () => 1 - plausible('saturation', await deps.sources.query(`inference_extension_flow_control_pool_saturation${sel}`), 0, Infinity),
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
  // A fraction metric (kv-cache usage) says nothing of how much one more request adds, so on its
  // own a cached reading would admit every poll until it expires. `capacity` (requests of this
  // dispatcher that take the servers to 1) lets the gate count its own traffic as for a count metric.
  if (maxPerPod > 0 && p.p.capacity !== undefined) throw bad(p.at, 'capacity is for a fraction metric (max_count_per_pod 0) only');
  const fractionCapacity = maxPerPod > 0 ? 0 : p.num('capacity', undefined, 1);
  const podsUrls = p.urls('pods_url', false);
  const podsMetric = podsUrls.length ? p.str('pods_metric') : '';
  const podsLabels = p.labels('pods_labels');
  const pool = p.str('pool', '');
  /** Requests this gate let through that are not finished yet. */
  let ownInFlight = 0;
  /** Requests that take the servers to saturation 1 at the last read; undefined: unknown (no ready pod). */
  let capacity: number | undefined;
  /** The pages of the last reading (a cached scrape gives the same arrays) and `ownInFlight` when it was new. */
  let lastPages: unknown[] = [];
  let ownAtRead = 0;
  /** Saturation = Σ value ÷ (max_count_per_pod × ready pods), or the mean value of a fraction metric. */
  const read = async (): Promise<number> => {
    const pages = await Promise.allSettled(urls.map((u) => deps.sources.scrape(u)));
    const ids = pages.map((pg) => (pg.status === 'fulfilled' ? pg.value : pg.reason));
    if (ids.length !== lastPages.length || ids.some((x, i) => x !== lastPages[i])) {
      lastPages = ids;
      ownAtRead = ownInFlight;
    }
    let sum: number | undefined;
    let answered = 0;
    for (const pg of pages) {
      if (pg.status !== 'fulfilled') continue;
      const v = sumMatching(pg.value, metric, labels);
      if (v === undefined) continue;
      // A count is never negative, a fraction never outside [0, 1]: one such page is a broken source.
      plausible(metric, v, 0, maxPerPod === 0 ? 1 : Infinity);
      answered++;
      sum = (sum ?? 0) + v;
    }
    if (sum === undefined) throw new Error('no server reported the metric');
    if (maxPerPod === 0) {
      capacity = fractionCapacity;
      return sum / answered;
    }
    let pods = answered;
    if (podsUrls.length) {
      const pp = await Promise.allSettled(podsUrls.map((u) => deps.sources.scrape(u)));
      let n: number | undefined;
      for (const x of pp) if (x.status === 'fulfilled') n = (n ?? 0) + (sumMatching(x.value, podsMetric, podsLabels) ?? 0);
      if (n === undefined) throw new Error('ready pods unavailable');
      if (!Number.isInteger(n)) throw new ImplausibleReading(`ready pods ${n} is not a whole number`);
      pods = plausible('ready pods', n, 0, MAX_PODS);
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
  // (polls and handlers that read it together, or the whole cache TTL) or still on their way to
  // the server are not in it yet, and each of them would pass the threshold on the old figure. So
  // the gate counts the requests it let through until they finish and takes the saturation as the
  // reading plus what its own traffic changed since (admitted minus finished), and at least what
  // its own in-flight requests alone make: its own traffic never takes the servers past the
  // threshold, whatever the scrape's lag. (Other clients' traffic shows in the reading.)
  const budgetAt = (sat: number | undefined, extra: number): number => {
    if (sat === undefined) return clamp(fallback);
    if (capacity === undefined) return clamp(1 - sat - baseline);
    const own = (ownInFlight + extra) / capacity;
    const since = (ownInFlight + extra - ownAtRead) / capacity;
    return clamp(1 - Math.max(sat + since, own) - baseline);
  };
  return {
    budget: async () => budgetAt(await saturation(), 0),
    async apply(_msg, releases) {
      // Check and count in one step after the read: concurrent applies cannot both take the last slot.
      if (budgetAt(await saturation(), 1) <= 0) return { kind: 'refuse' };
      ownInFlight++;
      let released = false;
      releases.push(() => {
        if (released) return;
        released = true;
        ownInFlight--;
      });
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
  // D = 1 − load ÷ capacity: above 1 the load is negative, so that source is broken → the next
  // one. The whole cascade shares one SOURCE_TIMEOUT_MS (meteredRead): a hanging Prometheus
  // holds a poll that long once, not once per query.
  const read = async (): Promise<number> => {
    const giveUpAt = Date.now() + SOURCE_TIMEOUT_MS;
    for (const q of cascade) {
      if (Date.now() >= giveUpAt) break; // the poll has stopped waiting: send no further query
      try {
        return plausible('prometheus-budget headroom', await deps.sources.query(q), -Infinity, 1);
      } catch {
        /* next source */
      }
    }
    throw new Error('every source failed');
  };
  return metered(deps, pool, baseline, read, (d) => (d > baseline ? clamp(d - baseline) : 0), fallback);
}
