// The gate catalogue of docs/design/dispatcher.md#gates: budget gates (how much of a poll's batch may be
// dispatched: constant, endpoint-scrape, prometheus-query/-saturation/-budget), admission gates
// (per message: local-max-concurrency, tier-priority-admission) and combinators (composite,
// wait-on-refuse). Gates are built from `{ gate_type, gate_params }` without I/O, so a config is
// validated by building its gates once.
import { QError, QErrorCode } from '@q/schema';
import type { ResultMessage } from '../formats.js';
import type { GateMetrics } from './metrics.js';
import { sumMatching, type MetricSources } from './sources.js';

/** What a gate decides for one message. */
export type Verdict =
  | { kind: 'continue' }
  /** Back to the queue (no result); `overflow`: refused by a quota, counted as `quota_exhausted`. */
  | { kind: 'refuse'; overflow?: boolean }
  /** Park in memory and ask again (pool gates); at queue level it behaves like `continue`. */
  | { kind: 'wait' }
  /** Final: the given result, else `GATE_DROPPED`. */
  | { kind: 'drop'; result?: Omit<ResultMessage, 'id'> };

/** The message as a gate sees it. */
export interface GateMessage {
  id: string;
  metadata?: Record<string, string>;
  /** Queue labels merged with framework labels (`classification` = `reserved` | `overflow`). */
  labels: Record<string, string>;
}

/** Gives back what an `apply` acquired. */
export type GateRelease = () => void;

/** A gate (docs/design/dispatcher.md#gates). */
export interface Gate {
  /** Capacity fraction in [0, 1]; never rejects (a failing source falls back). */
  budget(): Promise<number>;
  /** Per-message decision; may push release closures (run when the message is finished). */
  apply(msg: GateMessage, releases: GateRelease[], signal?: AbortSignal): Promise<Verdict>;
}

/** `{ gate_type, gate_params }` as configured. */
export interface GateSpec {
  gate_type: string;
  gate_params?: Record<string, unknown>;
}

/** What building a gate needs. */
export interface GateDeps {
  sources: MetricSources;
  /** Whether `prometheus_url` is configured (the `prometheus-*` gates need it). */
  hasPrometheus: boolean;
  metrics?: GateMetrics;
}

/** The gate types this dispatcher builds. */
export const GATE_TYPES = [
  'constant',
  'endpoint-scrape',
  'prometheus-query',
  'prometheus-saturation',
  'prometheus-budget',
  'local-max-concurrency',
  'tier-priority-admission',
  'composite',
  'wait-on-refuse',
] as const;

const CONTINUE: Verdict = { kind: 'continue' };
const clamp = (x: number) => (Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0);

function bad(at: string, msg: string): QError {
  return new QError(QErrorCode.CONFIG, `config: ${at}.${msg}`);
}

/** Reads `gate_params` (values may be numbers or numeric strings, docs/design/dispatcher.md#gates), naming bad fields. */
class Params {
  constructor(
    readonly at: string,
    readonly p: Record<string, unknown>,
    known: readonly string[],
  ) {
    if (typeof p !== 'object' || p === null || Array.isArray(p)) throw new QError(QErrorCode.CONFIG, `config: ${at} must be an object`);
    for (const k of Object.keys(p)) if (!known.includes(k)) throw bad(at, `${k}: unknown parameter (known: ${known.join(', ')})`);
  }
  num(name: string, dflt: number | undefined, min = -Infinity, max = Infinity): number {
    const v = this.p[name];
    if (v === undefined) {
      if (dflt === undefined) throw bad(this.at, `${name} is required`);
      return dflt;
    }
    const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN;
    if (!Number.isFinite(n) || n < min || n > max) throw bad(this.at, `${name} must be a number from ${min} to ${max}`);
    return n;
  }
  str(name: string, dflt?: string): string {
    const v = this.p[name];
    if (v === undefined) {
      if (dflt === undefined) throw bad(this.at, `${name} is required`);
      return dflt;
    }
    if (typeof v !== 'string' || v === '') throw bad(this.at, `${name} must be a non-empty string`);
    return v;
  }
  labels(name: string): Record<string, string> {
    const v = this.p[name];
    if (v === undefined) return {};
    if (typeof v !== 'object' || v === null || Array.isArray(v) || Object.values(v).some((x) => typeof x !== 'string')) {
      throw bad(this.at, `${name} must be an object of strings`);
    }
    return v as Record<string, string>;
  }
  urls(name: string, required: boolean): string[] {
    const v = this.p[name];
    if (v === undefined && !required) return [];
    const list =
      typeof v === 'string'
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : v;
    if (!Array.isArray(list) || list.length === 0 || list.some((u) => typeof u !== 'string' || !/^https?:\/\//.test(u))) {
      throw bad(this.at, `${name} must be an http(s) URL, a comma-separated list or an array of them`);
    }
    for (const u of list as string[]) {
      try {
        new URL(u);
      } catch {
        throw bad(this.at, `${name}: ${JSON.stringify(u)} is not a valid URL`);
      }
    }
    return list as string[];
  }
}

/**
 * Builds a gate. `at` names it in errors (`queues[0].gate_params`). Throws `QError` `CONFIG` for
 * an unknown type, an unknown or bad parameter, or a `prometheus-*` gate without `prometheus_url`.
 */
export function createGate(spec: GateSpec, deps: GateDeps, at: string): Gate {
  const type = spec.gate_type;
  const params = spec.gate_params ?? {};
  const pAt = `${at}.gate_params`;
  switch (type) {
    case 'constant':
      new Params(pAt, params, []);
      return budgetGate(async () => 1);
    case 'endpoint-scrape':
      return endpointScrape(
        new Params(pAt, params, [
          'url',
          'metric',
          'labels',
          'max_count_per_pod',
          'baseline',
          'threshold',
          'fallback',
          'pods_url',
          'pods_metric',
          'pods_labels',
          'pool',
        ]),
        deps,
      );
    case 'prometheus-query': {
      const p = new Params(pAt, params, ['query', 'fallback', 'pool']);
      needsPrometheus(deps, at, type);
      const query = p.str('query');
      const fallback = p.num('fallback', 0, 0, 1);
      const pool = p.str('pool', '');
      // The query's value is the budget itself; a failing query falls back to `fallback` (closed by default).
      return metered(
        deps,
        pool,
        0,
        async () => deps.sources.query(query),
        (d) => clamp(d),
        fallback,
      );
    }
    case 'prometheus-saturation': {
      const p = new Params(pAt, params, ['pool', 'namespace', 'threshold', 'fallback']);
      needsPrometheus(deps, at, type);
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
    case 'prometheus-budget':
      return prometheusBudget(new Params(pAt, params, ['pool', 'namespace', 'max_concurrency', 'baseline', 'fallback']), deps, at);
    case 'local-max-concurrency': {
      const p = new Params(pAt, params, ['limit', 'gating_mode']);
      const limit = p.num('limit', undefined, 1);
      const mode = p.str('gating_mode', 'classifying');
      if (mode !== 'classifying' && mode !== 'blocking') throw bad(pAt, 'gating_mode must be "classifying" or "blocking"');
      return new LocalMaxConcurrency(Math.floor(limit), mode === 'blocking');
    }
    case 'tier-priority-admission': {
      const p = new Params(pAt, params, ['saturation_gate', 'saturation_gate_params', 'tier_label']);
      const inner = createGate(
        { gate_type: p.str('saturation_gate'), gate_params: p.p.saturation_gate_params as Record<string, unknown> | undefined },
        deps,
        `${pAt}.saturation_gate`,
      );
      return tierPriorityAdmission(inner, p.str('tier_label', 'tier'));
    }
    case 'composite': {
      const p = new Params(pAt, params, ['gates']);
      const list = p.p.gates ?? [];
      if (!Array.isArray(list)) throw bad(pAt, 'gates must be an array of { gate_type, gate_params }');
      return composite(list.map((g, i) => createGate(gateSpec(g, `${pAt}.gates[${i}]`), deps, `${pAt}.gates[${i}]`)));
    }
    case 'wait-on-refuse': {
      const p = new Params(pAt, params, ['gate']);
      return waitOnRefuse(createGate(gateSpec(p.p.gate, `${pAt}.gate`), deps, `${pAt}.gate`));
    }
    default:
      throw new QError(QErrorCode.CONFIG, `config: ${at}.gate_type must be one of ${GATE_TYPES.map((t) => JSON.stringify(t)).join(', ')}`);
  }
}

function gateSpec(v: unknown, at: string): GateSpec {
  if (typeof v !== 'object' || v === null || typeof (v as GateSpec).gate_type !== 'string')
    throw new QError(QErrorCode.CONFIG, `config: ${at} must be { gate_type, gate_params }`);
  return v as GateSpec;
}

function needsPrometheus(deps: GateDeps, at: string, type: string): void {
  if (!deps.hasPrometheus) throw new QError(QErrorCode.CONFIG, `config: ${at}.gate_type ${type} needs prometheus_url`);
}

function selector(labels: Record<string, string>): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}

/** A budget gate's default `apply` (docs/design/dispatcher.md#gates): budget ≤ 0 → Refuse, else Continue. */
function budgetGate(budget: () => Promise<number>): Gate {
  return {
    budget,
    async apply() {
      return (await budget()) <= 0 ? { kind: 'refuse' } : CONTINUE;
    },
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
  deps.metrics?.threshold(pool, threshold);
  return budgetGate(async () => {
    try {
      const d = await read();
      if (!Number.isFinite(d)) throw new Error('no number');
      deps.metrics?.value(pool, d, true);
      return toBudget(d);
    } catch {
      deps.metrics?.value(pool, undefined, false);
      return clamp(fallback);
    }
  });
}

function endpointScrape(p: Params, deps: GateDeps): Gate {
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
    if (maxPerPod === 0) return answered > 1 ? sum / answered : sum;
    let pods = answered;
    if (podsUrls.length) {
      const pp = await Promise.allSettled(podsUrls.map((u) => deps.sources.scrape(u)));
      let n: number | undefined;
      for (const x of pp) if (x.status === 'fulfilled') n = (n ?? 0) + (sumMatching(x.value, podsMetric, podsLabels) ?? 0);
      if (n === undefined) throw new Error('ready pods unavailable');
      pods = n;
    }
    if (pods <= 0) return 1; // no ready pod: saturated
    return sum / (maxPerPod * pods);
  };
  return metered(deps, pool, 1 - baseline, read, (sat) => clamp(1 - sat - baseline), fallback);
}

function prometheusBudget(p: Params, deps: GateDeps, at: string): Gate {
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

/** In-process concurrency limit (docs/design/dispatcher.md#gates). */
class LocalMaxConcurrency implements Gate {
  #inFlight = 0;
  readonly #waiters: Array<() => void> = [];
  constructor(
    readonly limit: number,
    readonly blocking: boolean,
  ) {}
  async budget(): Promise<number> {
    return clamp((this.limit - this.#inFlight) / this.limit);
  }
  async apply(_msg: GateMessage, releases: GateRelease[], signal?: AbortSignal): Promise<Verdict> {
    while (this.#inFlight >= this.limit) {
      if (!this.blocking) return { kind: 'refuse' };
      if (signal?.aborted) throw new Error('gate wait aborted');
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          const i = this.#waiters.indexOf(wake);
          if (i >= 0) this.#waiters.splice(i, 1);
          reject(new Error('gate wait aborted'));
        };
        const wake = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        this.#waiters.push(wake);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    }
    this.#inFlight++;
    let done = false;
    releases.push(() => {
      if (done) return;
      done = true;
      this.#inFlight--;
      this.#waiters.shift()?.();
    });
    return CONTINUE;
  }
}

/** Budget = min of the inner budgets; apply = all or nothing (docs/design/dispatcher.md#gates ApplyChain). */
function composite(gates: Gate[]): Gate {
  return {
    async budget() {
      let b = 1;
      for (const g of gates) b = Math.min(b, await g.budget());
      return b;
    },
    async apply(msg, releases, signal) {
      const mine: GateRelease[] = [];
      for (const g of gates) {
        let v: Verdict;
        try {
          v = await g.apply(msg, mine, signal);
        } catch (err) {
          for (const r of mine.reverse()) r();
          throw err;
        }
        if (v.kind !== 'continue') {
          // Partial grants of the earlier gates go back at once.
          for (const r of mine.reverse()) r();
          return v;
        }
      }
      releases.push(...mine);
      return CONTINUE;
    },
  };
}

function waitOnRefuse(inner: Gate): Gate {
  return {
    budget: () => inner.budget(),
    async apply(msg, releases, signal) {
      const v = await inner.apply(msg, releases, signal);
      return v.kind === 'refuse' ? { kind: 'wait' } : v;
    },
  };
}

/** docs/design/dispatcher.md#gates: saturated ⇔ the inner gate refuses; then reserved waits, interactive overflow is shed, the rest refused. */
function tierPriorityAdmission(inner: Gate, tierLabel: string): Gate {
  return {
    budget: async () => 1,
    async apply(msg, releases, signal) {
      const v = await inner.apply(msg, releases, signal);
      if (v.kind !== 'refuse') return v.kind === 'drop' ? v : CONTINUE;
      const cls = msg.labels.classification;
      if (cls === 'reserved') return { kind: 'wait' };
      if (msg.labels[tierLabel] === 'interactive' && cls === 'overflow') {
        return { kind: 'drop', result: { payload: JSON.stringify({ error: 'Too Many Requests', code: 429 }) } };
      }
      return { kind: 'refuse' };
    },
  };
}
