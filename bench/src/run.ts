import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchArgs } from './args.js';
import { runScenario, type ScenarioResult } from './harness.js';
import { barsOf, renderChart } from './report/chart.js';
import { machineLine, report } from './report/markdown.js';
import { evaluateTargets } from './report/targets.js';
import { selectScenarios } from './scenarios/index.js';
import { describeMachine, openServer } from './server.js';

/** bench/ (from src/ under tsx or dist/ when built). */
export const BENCH_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const README_START = '<!-- bench:results:start -->';
const README_END = '<!-- bench:results:end -->';

/** What a whole benchmark run produced. */
export interface BenchOutcome {
  markdown: string;
  jsonPath: string;
  chartPath: string;
  results: ScenarioResult[];
  failed: string[];
}

/** Runs the selected scenarios and writes the JSON, the chart (and the README section). */
export async function runBench(args: BenchArgs, log: (line: string) => void): Promise<BenchOutcome> {
  const scenarios = selectScenarios(args.scenarios, args.smoke);
  const server = await openServer(process.env.DATABASE_URL, log);
  try {
    const machine = await describeMachine(server);
    log(`machine: ${machineLine(machine)}`);
    const started = Date.now();
    const results: ScenarioResult[] = [];
    for (const s of scenarios) {
      const t0 = Date.now();
      results.push(
        await runScenario(s, {
          serverDsn: server.dsn,
          smoke: args.smoke,
          reps: args.reps,
          warmupFraction: 0.1,
          runTimeoutMs: args.smoke ? 60_000 : 900_000,
          log,
        }),
      );
      log(`[${s.name}] done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
    const date = new Date().toISOString().slice(0, 10);
    const outDir = path.resolve(args.out ?? path.join(BENCH_DIR, 'results'));
    fs.mkdirSync(outDir, { recursive: true });
    const targets = evaluateTargets(results);
    const jsonPath = path.join(outDir, `${date}.json`);
    const chartPath = path.join(outDir, `${date}.png`);
    const reps = args.smoke ? 1 : args.reps;
    fs.writeFileSync(
      jsonPath,
      `${JSON.stringify({ date: new Date().toISOString(), smoke: args.smoke, reps, durationS: (Date.now() - started) / 1000, machine, results, targets }, null, 2)}\n`,
    );
    const subtitle = `${machine.cpus} CPUs, ${machine.memoryGiB} GIB, ${machine.postgres}, ${machine.server.toUpperCase()}, ${reps} RUNS/SYSTEM (MEDIANS)`;
    fs.writeFileSync(chartPath, renderChart(`q vs peers, ${date}${args.smoke ? ' (smoke)' : ''}`, subtitle, barsOf(results)));
    const chartRel = path.relative(BENCH_DIR, chartPath).split(path.sep).join('/');
    const markdown = report({ date, machine, results, targets, reps, smoke: args.smoke, chart: chartRel });
    if (args.readme) updateReadme(markdown);
    const failed = results.flatMap((r) => r.systems.filter((s) => s.failed).map((s) => `${r.name}/${s.system}: ${s.failed}`));
    return { markdown, jsonPath, chartPath, results, failed };
  } finally {
    await server.stop();
  }
}

function updateReadme(markdown: string): void {
  const file = path.join(BENCH_DIR, 'README.md');
  const text = fs.readFileSync(file, 'utf8');
  const a = text.indexOf(README_START);
  const b = text.indexOf(README_END);
  if (a < 0 || b < a) throw new Error(`bench/README.md has no ${README_START} … ${README_END} section`);
  fs.writeFileSync(file, `${text.slice(0, a + README_START.length)}\n${markdown}\n${text.slice(b)}`);
}
