import type { Metric } from '../scenario.js';
import { capMark, formatValue, ratioMark, type ScenarioResult } from '../harness.js';
import type { MachineInfo } from '../server.js';
import type { TargetOutcome } from './targets.js';

const fmt = (v: number | undefined, m: Metric) => (v === undefined ? '' : `${capMark(m, v)}${formatValue(v, m.unit)}`);

/** The results table: one row per scenario × metric × system, ratios as "baseline advantage". */
export function resultsTable(results: ScenarioResult[]): string {
  const lines = ['| scenario | metric | system | min | median | max | runs | q advantage |', '|---|---|---|---:|---:|---:|---:|---:|'];
  for (const r of results) {
    for (const m of r.metrics) {
      for (const s of r.systems) {
        const head = `| ${r.name} | ${m.key} (${m.unit}, ${m.better} is better) | ${s.system}`;
        if (s.skipped) {
          lines.push(`${head} | skipped: ${s.skipped} | | | | |`);
          continue;
        }
        if (s.failed) {
          lines.push(`${head} | **FAILED**: ${s.failed.replace(/\|/g, '/')} | | | | |`);
          continue;
        }
        const sum = s.summary[m.key];
        const ratio = r.ratios.find((x) => x.system === s.system && x.metric === m.key);
        const mark = ratio ? ratioMark(r, ratio) : '';
        const adv = s.system === r.baseline ? '(baseline)' : !ratio ? '' : mark === '?' ? 'both capped' : `${mark}${ratio.advantage.toFixed(2)}×`;
        lines.push(`${head} | ${fmt(sum?.min, m)} | **${fmt(sum?.median, m)}** | ${fmt(sum?.max, m)} | ${sum?.n ?? 0} | ${adv} |`);
      }
    }
  }
  return lines.join('\n');
}

/** What each `≥` of the table means: a metric's cap, and the runs of each system that reached it. */
export function capNotes(results: ScenarioResult[]): string {
  const notes: string[] = [];
  for (const r of results) {
    for (const m of r.metrics) {
      if (m.cap === undefined) continue;
      const capped = r.systems
        .map((s) => ({ system: s.system, runs: s.samples.length, at: s.samples.filter((x) => capMark(m, x[m.key]) !== '').length }))
        .filter((s) => s.at > 0);
      if (capped.length === 0) continue;
      const who = capped.map((s) => `${s.system} in ${s.at} of ${s.runs} run(s)`).join(', ');
      notes.push(`- ≥ in ${r.name} ${m.key}: capped at ${formatValue(m.cap, m.unit)}: ${m.capNote ?? 'the run stopped waiting'} — ${who}.`);
    }
  }
  return notes.join('\n');
}

/** Targets of the bench issue, met or not. */
export function targetsTable(targets: TargetOutcome[]): string {
  if (targets.length === 0) return '';
  const lines = ['| target | measured | met |', '|---|---:|:---:|'];
  for (const t of targets) lines.push(`| ${t.target} | ${t.measured} | ${t.met === undefined ? '–' : t.met ? 'yes' : '**no**'} |`);
  return lines.join('\n');
}

/** One paragraph describing the machine and the server. */
export function machineLine(m: MachineInfo): string {
  const s = m.postgresSettings;
  return (
    `${m.cpus} CPUs (${m.cpuModel}), ${m.memoryGiB} GiB RAM, ${m.platform}, Node ${m.node}; ` +
    `${m.postgres} (${m.server === 'embedded' ? 'embedded, same machine' : 'DATABASE_URL'}; ` +
    `fsync=${s.fsync ?? '?'}, synchronous_commit=${s.synchronous_commit ?? '?'}, shared_buffers=${s.shared_buffers ?? '?'}).`
  );
}

/** The whole Markdown report printed on stdout (and pasted into README.md by `--readme`). */
export function report(opts: {
  date: string;
  machine: MachineInfo;
  results: ScenarioResult[];
  targets: TargetOutcome[];
  reps: number;
  smoke: boolean;
  chart?: string;
}): string {
  const parts = [
    `Run of ${opts.date}${opts.smoke ? ' (SMOKE: tiny sizes, figures meaningless)' : ''}: ${opts.reps} measured run(s) per system after one warm-up, interleaved, each in a fresh database.`,
    '',
    `Machine: ${machineLine(opts.machine)}`,
    '',
    '"q advantage" is how many times better q is than that system on the metric (median vs median; > 1 = q better; ' +
      "for latency it is the peer's latency ÷ q's). For the OpenTelemetry rows the baseline is q with tracing, so the ratio is traced ÷ untraced throughput.",
    '',
    resultsTable(opts.results),
  ];
  const capped = capNotes(opts.results);
  if (capped) parts.push('', capped);
  const t = targetsTable(opts.targets);
  if (t) parts.push('', 'Targets of the bench issue:', '', t);
  if (opts.chart) parts.push('', `![ratios](${opts.chart})`);
  return parts.join('\n');
}
