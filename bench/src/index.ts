export { parseArgs, USAGE, type BenchArgs } from './args.js';
export { runBench, BENCH_DIR, type BenchOutcome } from './run.js';
export { runScenario, type ScenarioResult, type SystemResult, type Ratio } from './harness.js';
export type { Scenario, System, Metric, Measurement, RunContext } from './scenario.js';
export { allScenarios, selectScenarios } from './scenarios/index.js';
export { percentile, summarize, type Summary } from './stats.js';
