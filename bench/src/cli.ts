#!/usr/bin/env node
/**
 * `pnpm bench [scenario…]`: q against pg-boss, graphile-worker and the raw-SQL limit.
 * Markdown table on stdout, progress on stderr; exit code 1 if any run failed its own checks.
 */
import { parseArgs, USAGE } from './args.js';
import { runInFlight } from './harness.js';
import { runBench } from './run.js';
import { allScenarios } from './scenarios/index.js';

const started = Date.now();
const log = (line: string) => process.stderr.write(`${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s ${line}\n`);

// An error nobody handles (a peer's connection error, a stray rejection) would kill the process
// with a stack that names no system: say which run it happened in, then exit.
const crash = (kind: string) => (err: unknown) => {
  const run = runInFlight();
  log(
    `bench: ${kind}${run ? ` during ${run} (that system left something unhandled, e.g. a connection without an 'error' listener)` : ''}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
  );
  process.exit(1);
};
process.on('uncaughtException', crash('uncaught exception'));
process.on('unhandledRejection', crash('unhandled rejection'));

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  if (args.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (args.list) {
    for (const s of allScenarios()) process.stdout.write(`${s.name}\t${s.title}\n`);
    return 0;
  }
  const out = await runBench(args, log);
  process.stdout.write(`${out.markdown}\n`);
  log(`results: ${out.jsonPath}\nchart:   ${out.chartPath}`);
  if (out.failed.length > 0) {
    log(`\nFAILED (${out.failed.length}):\n${out.failed.map((f) => `  ${f}`).join('\n')}`);
    return 1;
  }
  return 0;
}

main().then(
  // Peers may keep timers alive after stop(): exit explicitly once everything is written.
  (code) => process.exit(code),
  (err: unknown) => {
    log(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);
