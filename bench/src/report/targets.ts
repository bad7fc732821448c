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

/** The targets of the bench issue (2-core machine, server on the same box). */
export function evaluateTargets(list: ScenarioResult[]): TargetOutcome[] {
  const results: Results = new Map(list.map((r) => [r.name, r]));
  const out: TargetOutcome[] = [];
  for (const c of [8, 32]) {
    const s = `job-drain-c${c}`;
    if (!results.has(s)) continue;
    out.push(atLeast(`${s}: q ≥ 2.5× graphile-worker`, advantage(results, s, 'graphile-worker'), 2.5));
    out.push(atLeast(`${s}: q ≥ 0.6× raw-sql`, advantage(results, s, 'raw-sql'), 0.6));
  }
  if (results.has('job-enqueue')) {
    const peers = ['graphile-worker', 'pg-boss'].map((p) => advantage(results, 'job-enqueue', p, 'batch'));
    const vsBetter = peers.some((p) => p === undefined) ? undefined : Math.min(...(peers as number[]));
    out.push(atLeast('job-enqueue batch: q ≥ 1.5× the better peer', vsBetter, 1.5));
  }
  if (results.has('job-latency')) {
    const p50 = medianOf(results, 'job-latency', 'q', 'p50');
    out.push(
      p50 === undefined
        ? { target: 'job-latency: q p50 ≤ 5 ms', measured: 'not measured', met: undefined }
        : { target: 'job-latency: q p50 ≤ 5 ms', measured: `${p50.toFixed(2)} ms`, met: p50 <= 5 },
    );
  }
  for (const r of [1, 4]) {
    const s = `request-dispatch-ack-r${r}`;
    if (results.has(s)) out.push(atLeast(`${s}: q ≥ 0.6× raw-sql`, advantage(results, s, 'raw-sql'), 0.6));
  }
  for (const s of ['otel-job-drain', 'otel-dispatch-ack']) {
    if (!results.has(s)) continue;
    const ratio = advantage(results, s, 'q');
    out.push(
      ratio === undefined
        ? { target: `${s}: tracing overhead ≤ 10 %`, measured: 'not measured', met: undefined }
        : { target: `${s}: tracing overhead ≤ 10 %`, measured: `${((1 - ratio) * 100).toFixed(1)} %`, met: ratio >= 0.9 },
    );
  }
  return out;
}
