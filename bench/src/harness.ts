import type { Measurement, Metric, RunContext, Scenario } from './scenario.js';
import { freshDatabase } from './server.js';
import { summarize, type Summary } from './stats.js';

/** Figures of one system in one scenario. */
export interface SystemResult {
  system: string;
  /** Why it did not run (package not landed, …). */
  skipped?: string;
  /** Why it failed (a verification error, a crash, a timeout): its figures are void. */
  failed?: string;
  samples: Measurement[];
  summary: Record<string, Summary>;
}

/** `advantage` > 1 means the baseline is better than `system` on `metric`. */
export interface Ratio {
  metric: string;
  system: string;
  /** baseline ÷ system for higher-is-better metrics, system ÷ baseline for lower-is-better ones. */
  advantage: number;
}

/** Everything measured for one scenario. */
export interface ScenarioResult {
  name: string;
  title: string;
  baseline: string;
  metrics: Metric[];
  systems: SystemResult[];
  ratios: Ratio[];
}

/** How a run of the whole benchmark is shaped. */
export interface HarnessOptions {
  serverDsn: string;
  smoke: boolean;
  /** Default repetitions per system (a scenario may set its own). */
  reps: number;
  /** Warm-up size as a fraction of the full size. */
  warmupFraction: number;
  /** A run that takes longer than this fails. */
  runTimeoutMs: number;
  log(line: string): void;
}

/**
 * Runs a scenario: one warm-up per system, then `reps` rounds with the systems interleaved
 * (A B C, B C A, …) so drift of a shared machine hits every system alike; each run in a fresh database.
 */
export async function runScenario(scenario: Scenario, opts: HarnessOptions): Promise<ScenarioResult> {
  const results = new Map<string, SystemResult>();
  const active: typeof scenario.systems = [];
  for (const sys of scenario.systems) {
    const skipped = sys.skip ? await sys.skip() : undefined;
    results.set(sys.name, { system: sys.name, samples: [], summary: {}, ...(skipped ? { skipped } : {}) });
    if (skipped) opts.log(`[${scenario.name}] ${sys.name}: SKIPPED — ${skipped}`);
    else active.push(sys);
  }

  const reps = opts.smoke ? 1 : (scenario.reps ?? Math.min(opts.reps, scenario.maxReps ?? Infinity));
  const rounds: Array<{ warmup: boolean; label: string }> = [];
  if (!opts.smoke && scenario.warmupFraction !== 0) rounds.push({ warmup: true, label: 'warm-up' });
  for (let r = 1; r <= reps; r++) rounds.push({ warmup: false, label: `rep ${r}/${reps}` });

  for (const [r, round] of rounds.entries()) {
    // Rotate the order every round (A B C, B C A, …): no system always runs first or last.
    const order = active.map((_, i) => active[(i + r) % active.length] as (typeof active)[number]);
    for (const sys of order) {
      const res = results.get(sys.name) as SystemResult;
      if (res.failed) continue;
      const prefix = `[${scenario.name}] ${round.label} ${sys.name}`;
      try {
        const m = await runOnce(scenario, sys.run, round.warmup, opts, prefix);
        for (const metric of scenario.metrics) {
          const v = m[metric.key];
          if (typeof v !== 'number' || !Number.isFinite(v)) throw new Error(`run returned no finite value for ${metric.key}`);
        }
        opts.log(`${prefix}: ${formatMeasurement(scenario.metrics, m)}${round.warmup ? ' (discarded)' : ''}`);
        if (!round.warmup) res.samples.push(m);
      } catch (err) {
        res.failed = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        opts.log(`${prefix}: FAILED — ${res.failed}`);
      }
    }
  }

  for (const res of results.values()) {
    if (res.failed || res.samples.length === 0) continue;
    for (const metric of scenario.metrics) res.summary[metric.key] = summarize(res.samples.map((s) => s[metric.key] as number));
  }
  return {
    name: scenario.name,
    title: scenario.title,
    baseline: scenario.baseline,
    metrics: scenario.metrics,
    systems: [...results.values()],
    ratios: ratiosOf(scenario, results),
  };
}

/** How long a run's connections may take to go away after its `close()` before they count as leaked. */
const CLOSE_GRACE_MS = 5_000;

let inFlight: string | undefined;

/**
 * The run in progress (`[scenario] rep 1/1 system`), or undefined between runs: the CLI names it
 * when the process dies of an uncaught error, so a crash says which system caused it.
 */
export function runInFlight(): string | undefined {
  return inFlight;
}

async function runOnce(
  scenario: Scenario,
  run: (ctx: RunContext) => Promise<Measurement>,
  warmup: boolean,
  opts: HarnessOptions,
  prefix: string,
): Promise<Measurement> {
  const db = await freshDatabase(opts.serverDsn);
  const ctx: RunContext = {
    dsn: db.dsn,
    smoke: opts.smoke,
    warmup,
    n: (full, smoke) =>
      opts.smoke ? smoke : warmup ? Math.max(smoke, Math.round(full * (scenario.warmupFraction ?? opts.warmupFraction))) : full,
    log: (message) => opts.log(`${prefix}: ${message}`),
  };
  inFlight = prefix;
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  let outcome: { ok: true; m: Measurement } | { ok: false; err: unknown };
  try {
    const m = await Promise.race([
      run(ctx),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          timedOut = true;
          reject(new Error(`${scenario.name} run exceeded ${opts.runTimeoutMs} ms`));
        }, opts.runTimeoutMs);
      }),
    ]);
    outcome = { ok: true, m };
  } catch (err) {
    outcome = { ok: false, err };
  } finally {
    clearTimeout(timer);
  }
  let leak: string | undefined;
  try {
    // Every system closes all of its connections before its run returns; dropping the database
    // under a connection still open kills it, which is a bug of that system's handle, so say whose.
    // A timed-out run is still going: its connections are expected, FORCE ends them.
    const left = await db.connectionsLeft(timedOut ? 0 : CLOSE_GRACE_MS);
    if (left.length > 0 && !timedOut) {
      const what = left.map((c) => `pid ${c.pid} '${c.applicationName}' ${c.state}${c.query ? `: ${c.query}` : ''}`).join('; ');
      leak = `left ${left.length} connection(s) to its database open after its run: ${what}`;
      opts.log(`${prefix}: LEAKED — ${leak}`);
    }
  } catch (err) {
    opts.log(`${prefix}: could not list the connections to ${db.name}: ${String(err)}`);
  }
  try {
    // FORCE ends whatever a failed or timed-out run left connected.
    await db.drop().catch((err: unknown) => opts.log(`${prefix}: could not drop ${db.name}: ${String(err)}`));
  } finally {
    inFlight = undefined;
  }
  if (!outcome.ok) throw outcome.err;
  if (leak) throw new Error(leak);
  return outcome.m;
}

function ratiosOf(scenario: Scenario, results: Map<string, SystemResult>): Ratio[] {
  const base = results.get(scenario.baseline);
  if (!base || base.failed || base.skipped || base.samples.length === 0) return [];
  const out: Ratio[] = [];
  for (const res of results.values()) {
    if (res.system === scenario.baseline || res.failed || res.skipped || res.samples.length === 0) continue;
    for (const metric of scenario.metrics) {
      const b = base.summary[metric.key]?.median;
      const o = res.summary[metric.key]?.median;
      if (b === undefined || o === undefined || b <= 0 || o <= 0) continue;
      out.push({ metric: metric.key, system: res.system, advantage: metric.better === 'higher' ? b / o : o / b });
    }
  }
  return out;
}

/** `≥` when `v` is at its metric's cap (the run stopped waiting there: the true value is at least that), else ''. */
export function capMark(metric: Metric, v: number | undefined): string {
  return metric.cap !== undefined && v !== undefined && v >= metric.cap ? '≥' : '';
}

/**
 * How a ratio of medians is bounded when one of them is at its metric's cap: `≥` when the peer's
 * is (its wait is at least that), `≤` when the baseline's is, `?` when both are (no ratio).
 */
export function ratioMark(result: ScenarioResult, ratio: Ratio): string {
  const metric = result.metrics.find((m) => m.key === ratio.metric);
  if (metric?.cap === undefined) return '';
  const median = (system: string) => result.systems.find((s) => s.system === system)?.summary[ratio.metric]?.median;
  const peer = capMark(metric, median(ratio.system));
  const base = capMark(metric, median(result.baseline));
  return peer && base ? '?' : peer ? '≥' : base ? '≤' : '';
}

/** `12,345 jobs/s` style, for progress lines and tables. */
export function formatValue(v: number, unit: string): string {
  const digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2;
  return `${v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 })} ${unit}`;
}

function formatMeasurement(metrics: Metric[], m: Measurement): string {
  return metrics.map((x) => `${x.key} ${formatValue(m[x.key] ?? NaN, x.unit)}`).join(', ');
}
