import type { ScenarioResult } from '../harness.js';

/** A target of the bench issue and how this run fares against it. */
export interface TargetOutcome {
  target: string;
  measured: string;
  /** undefined: not measurable in this run (scenario skipped or failed). */
  met: boolean | undefined;
}

type Results = Map<string, ScenarioResult>;

function advantage(results: Results, scenario: string, system: string, metric = 'rate'): number | undefined {
  return results.get(scenario)?.ratios.find((r) => r.system === system && r.metric === metric)?.advantage;
}

function medianOf(results: Results, scenario: string, system: string, metric: string): number | undefined {
  return results.get(scenario)?.systems.find((s) => s.system === system)?.summary[metric]?.median;
}

function atLeast(target: string, value: number | undefined, min: number): TargetOutcome {
  return value === undefined
    ? { target, measured: 'not measured', met: undefined }
    : { target, measured: `${value.toFixed(2)}×`, met: value >= min };
}

/** The lower of q's advantages over the two peers, or undefined when either is missing. */
function vsBetterPeer(results: Results, scenario: string, metric: string): number | undefined {
  const peers = ['graphile-worker', 'pg-boss'].map((p) => advantage(results, scenario, p, metric));
  return peers.some((p) => p === undefined) ? undefined : Math.min(...(peers as number[]));
}

/**
 * The targets of the bench issue and of the job-throughput issue (2-core machine, server on the
 * same box), each with its measure in this run.
 */
export function evaluateTargets(list: ScenarioResult[]): TargetOutcome[] {
  const results: Results = new Map(list.map((r) => [r.name, r]));
  const out: TargetOutcome[] = [];
  for (const c of [8, 32]) {
    const s = `job-drain-c${c}`;
    if (!results.has(s)) continue;
    const graphile = advantage(results, s, 'graphile-worker');
    const raw = advantage(results, s, 'raw-sql');
    out.push(atLeast(`${s}: q (default options) ≥ 1.5× graphile-worker (tuned)`, graphile, 1.5));
    out.push(atLeast(`${s}: q (default options) ≥ 0.5× raw-sql`, raw, 0.5));
    out.push(atLeast(`${s}: q ≥ 2.5× graphile-worker`, graphile, 2.5));
    out.push(atLeast(`${s}: q ≥ 0.6× raw-sql`, raw, 0.6));
  }
  if (results.has('job-enqueue')) {
    out.push(atLeast('job-enqueue batch: q ≥ 1.5× the better peer', vsBetterPeer(results, 'job-enqueue', 'batch'), 1.5));
    out.push(atLeast('job-enqueue single: q ≥ 2× both peers', vsBetterPeer(results, 'job-enqueue', 'single'), 2));
  }
  if (results.has('job-latency')) {
    const p50 = medianOf(results, 'job-latency', 'q', 'p50');
    out.push(
      p50 === undefined
        ? { target: 'job-latency: q p50 ≤ 5 ms', measured: 'not measured', met: undefined }
        : { target: 'job-latency: q p50 ≤ 5 ms', measured: `${p50.toFixed(2)} ms`, met: p50 <= 5 },
    );
    // For latency the advantage is the peer's latency ÷ q's: ≥ 1 means q's p50 is at most graphile's.
    out.push(atLeast('job-latency: q p50 ≤ graphile-worker p50', advantage(results, 'job-latency', 'graphile-worker', 'p50'), 1));
    out.push(atLeast('job-latency: q p99 ≤ 2× graphile-worker p99', advantage(results, 'job-latency', 'graphile-worker', 'p99'), 0.5));
  }
  if (results.has('job-drain-retained')) {
    const ratio = medianOf(results, 'job-drain-retained', 'q', 'ratio');
    out.push(atLeast('job-drain-retained: retained ÷ empty ≥ 0.95', ratio, 0.95));
  }
  if (results.has('job-drain-held-xmin')) {
    // How much of its rate a system keeps while the snapshot is held (during ÷ before).
    const kept = (system: string) => {
      const during = medianOf(results, 'job-drain-held-xmin', system, 'during');
      const before = medianOf(results, 'job-drain-held-xmin', system, 'before');
      return during === undefined || before === undefined || before === 0 ? undefined : during / before;
    };
    const q = kept('q');
    const g = kept('graphile-worker');
    out.push(
      q === undefined || g === undefined
        ? { target: 'job-drain-held-xmin: q keeps more of its rate than graphile-worker', measured: 'not measured', met: undefined }
        : {
            target: 'job-drain-held-xmin: q keeps more of its rate than graphile-worker',
            measured: `q ${(q * 100).toFixed(0)} % vs ${(g * 100).toFixed(0)} %`,
            met: q > g,
          },
    );
  }
  if (results.has('job-groups-limit')) {
    const s = 'job-groups-limit';
    // Any run that let one group past its limit fails the target, not only the median run.
    const over = results.get(s)?.systems.find((x) => x.system === 'q')?.summary['over']?.max;
    const target = `${s}: q over-admission 0 (every run)`;
    out.push(
      over === undefined
        ? { target, measured: 'not measured', met: undefined }
        : { target, measured: `${over} job(s) over the limit`, met: over === 0 },
    );
    out.push(atLeast(`${s}: q ≥ 1.5× pg-boss`, advantage(results, s, 'pg-boss'), 1.5));
    out.push(atLeast(`${s}: q grouped ≥ 0.7× q ungrouped`, advantage(results, s, 'q-ungrouped'), 0.7));
  }
  if (results.has('job-groups-fair')) {
    const delay = medianOf(results, 'job-groups-fair', 'q', 'delay');
    const target = 'job-groups-fair: q start delay of B ≤ 2 × the handler time (100 ms)';
    out.push(
      delay === undefined
        ? { target, measured: 'not measured', met: undefined }
        : { target, measured: `${delay.toFixed(1)} ms`, met: delay <= 100 },
    );
  }
  for (const r of [1, 4]) {
    const s = `request-dispatch-ack-r${r}`;
    if (results.has(s)) out.push(atLeast(`${s}: q ≥ 0.6× raw-sql`, advantage(results, s, 'raw-sql'), 0.6));
  }
  const overhead = (s: string, against: string, what: string, max: number): void => {
    if (!results.has(s)) return;
    const ratio = advantage(results, s, against);
    const target = `${s}: ${what} ≤ ${max} %`;
    out.push(
      ratio === undefined
        ? { target, measured: 'not measured', met: undefined }
        : { target, measured: `${((1 - ratio) * 100).toFixed(1)} %`, met: ratio >= 1 - max / 100 },
    );
  };
  overhead('otel-job-drain', 'q', 'tracing overhead', 5);
  // The part of it q adds to the SDK's own cost of one span per job.
  overhead('otel-job-drain', 'q+span-in-handler', 'tracing overhead beyond one SDK span per job', 5);
  if (results.has('otel-job-drain')) {
    // With the SDK's ratio sampler at 10 %, as production tracing usually runs: traced ÷ untraced.
    const sampled = medianOf(results, 'otel-job-drain', 'q+otel-sampled-10%', 'rate');
    const untraced = medianOf(results, 'otel-job-drain', 'q', 'rate');
    const target = 'otel-job-drain: tracing overhead with 10 % of traces sampled ≤ 5 %';
    out.push(
      sampled === undefined || untraced === undefined || untraced === 0
        ? { target, measured: 'not measured', met: undefined }
        : { target, measured: `${((1 - sampled / untraced) * 100).toFixed(1)} %`, met: sampled / untraced >= 0.95 },
    );
  }
  overhead('otel-dispatch-ack', 'q', 'tracing overhead', 10);
  return out;
}
