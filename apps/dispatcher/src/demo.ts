// `q-dispatcher demo`: the whole pipeline on one machine with nothing installed — the embedded
// Postgres (or a given DSN), the simulated inference endpoint, a batch of requests over a few
// tenants behind a concurrency gate, live progress, and a summary table.
import cliProgress from 'cli-progress';
import { RequestStore } from '@q/store';
import type { EmbeddedPostgres } from '@q/devdb';
import { loadConfig } from './config/load.js';
import { popResults, submitRequests } from './client/producer.js';
import { freshSchema, startEmbedded } from './embedded.js';
import type { PublicRequest } from './formats.js';
import { Dispatcher } from './service/dispatcher.js';
import { simulated, startInferenceServer } from './sim/server.js';

/** Options of {@link runDemo}. */
export interface DemoOptions {
  requests: number;
  tenants: number;
  /** Concurrency limit per tenant. */
  limit: number;
  /** Use this database instead of the embedded one. */
  dsn?: string;
  /** Embedded data directory (default `.q/pgdata`). */
  dataDir?: string;
  latencyMs: [number, number];
  rate429: number;
  rate503: number;
  /** Dispatcher workers. */
  concurrency: number;
  /** Seconds each request may take. */
  deadlineSeconds: number;
  /** Where progress and the summary go. */
  out: NodeJS.WritableStream & { isTTY?: boolean };
}

/** What the demo measured. */
export interface DemoSummary {
  submitted: number;
  results: number;
  completed: number;
  retried: number;
  failedByCode: Record<string, number>;
  seconds: number;
  throughput: number;
  p50Ms: number;
  p99Ms: number;
  peak: Record<string, number>;
  limit: number;
}

const SCHEMA = 'q_demo';

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

/** Runs the demo; resolves with the summary once every result is back (or after 3 minutes). */
export async function runDemo(opts: DemoOptions): Promise<DemoSummary> {
  const log = (line: string) => opts.out.write(`${line}\n`);
  let embedded: EmbeddedPostgres | undefined;
  let dsn = opts.dsn;
  if (!dsn) {
    log('starting the embedded PostgreSQL (data under .q/) …');
    embedded = await startEmbedded(opts.dataDir);
    dsn = await freshSchema(embedded, SCHEMA);
  }
  const cleanups: Array<() => Promise<unknown>> = [];
  if (embedded) {
    const e = embedded;
    cleanups.push(() => e.stop());
  }
  try {
    return await demoOn(dsn, opts, log, cleanups);
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  }
}

async function demoOn(
  dsn: string,
  opts: DemoOptions,
  log: (line: string) => void,
  cleanups: Array<() => Promise<unknown>>,
): Promise<DemoSummary> {
  const sim = await startInferenceServer({
    behaviour: simulated({ latencyMs: opts.latencyMs, rate429: opts.rate429, rate503: opts.rate503, retryAfterSeconds: 1 }),
    record: false,
  });
  cleanups.push(() => sim.close());
  const route = 'demo-results';
  const queue = 'demo';
  const config = loadConfig({
    env: {},
    document: {
      url: dsn,
      concurrency: opts.concurrency,
      batch_size: opts.concurrency,
      poll_interval_ms: 100,
      lease_ttl_seconds: 10,
      max_connections: 12,
      health_port: -1,
      metrics_port: -1,
      queues: [
        {
          queue_name: queue,
          igw_base_url: sim.url,
          result_queue_name: route,
          gates: [{ kind: 'concurrency', limit: opts.limit, wait_ms: 2000 }],
        },
      ],
    },
  });
  const submittedAt = new Map<string, number>();
  const latencies: number[] = [];
  const onResult = (_q: string, r: { id: string }) => {
    const t = submittedAt.get(r.id);
    if (t !== undefined) latencies.push(Date.now() - t);
  };
  const dispatcher = await Dispatcher.start({ config, onResult });
  cleanups.push(() => dispatcher.stop());
  const producer = await RequestStore.open(dsn, { maxConns: 2, applicationName: 'q-demo-producer' });
  cleanups.push(() => producer.close());
  const tenants = Array.from({ length: opts.tenants }, (_, i) => `tenant-${String.fromCharCode(97 + (i % 26))}${i >= 26 ? i : ''}`);
  const started = Date.now();
  let received = 0;
  const byCode: Record<string, number> = {};
  let completed = 0;
  const bar = opts.out.isTTY
    ? new cliProgress.SingleBar(
        {
          stream: opts.out as NodeJS.WritableStream as never,
          format: ' {bar} {value}/{total} results | {rate}/s | {eta_formatted} left',
          etaBuffer: 200,
        },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  try {
    log(
      `simulated endpoint ${sim.url} (latency ${opts.latencyMs[0]}–${opts.latencyMs[1]} ms, 429 ${pct(opts.rate429)}, 503 ${pct(opts.rate503)})`,
    );
    log(`submitting ${opts.requests} requests over ${opts.tenants} tenants, concurrency gate ${opts.limit} per tenant …`);
    bar?.start(opts.requests, 0, { rate: '0' });
    const deadline = Math.floor(Date.now() / 1000) + opts.deadlineSeconds;
    for (let i = 0; i < opts.requests; i += 500) {
      const chunk: PublicRequest[] = [];
      for (let j = i; j < Math.min(opts.requests, i + 500); j++) {
        const id = `demo-${j}`;
        chunk.push({
          id,
          created: Math.floor(Date.now() / 1000),
          deadline,
          payload: { model: 'sim', prompt: `request ${j}`, max_tokens: 16 },
          metadata: { userid: tenants[j % tenants.length] as string },
        });
        submittedAt.set(id, Date.now());
      }
      await submitRequests(producer, chunk, { queue, route });
    }
    let lastLine = Date.now();
    const giveUp = Date.now() + 180_000;
    while (received < opts.requests && Date.now() < giveUp) {
      const rows = await popResults(producer, route, 500);
      for (const { result } of rows) {
        received++;
        if (result.error_code) byCode[result.error_code] = (byCode[result.error_code] ?? 0) + 1;
        else if ((result.status_code ?? 0) >= 400) byCode[`HTTP ${result.status_code}`] = (byCode[`HTTP ${result.status_code}`] ?? 0) + 1;
        else completed++;
      }
      const rate = (received / Math.max(0.001, (Date.now() - started) / 1000)).toFixed(0);
      bar?.update(received, { rate });
      if (!bar && Date.now() - lastLine >= 2000) {
        lastLine = Date.now();
        log(`  ${received}/${opts.requests} results (${rate}/s)`);
      }
      if (rows.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    bar?.stop();
  }
  await producer.close();
  await dispatcher.stop();
  const seconds = (Date.now() - started) / 1000;
  const m = dispatcher.metrics.get(queue);
  latencies.sort((a, b) => a - b);
  const peak: Record<string, number> = {};
  for (const t of tenants) peak[t] = sim.peak.get(t) ?? 0;
  return {
    submitted: opts.requests,
    results: received,
    completed,
    retried: m?.tallies.retries ?? 0,
    failedByCode: byCode,
    seconds,
    throughput: received / seconds,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    peak,
    limit: opts.limit,
  };
}

function pct(x: number): string {
  return `${(x * 100).toFixed(1)}%`;
}

/** The summary table. */
export function formatSummary(s: DemoSummary): string {
  const rows: Array<[string, string]> = [
    ['submitted', String(s.submitted)],
    ['results', String(s.results)],
    ['completed (HTTP < 400)', String(s.completed)],
    ['retried (429/5xx, re-queued)', String(s.retried)],
  ];
  const codes = Object.entries(s.failedByCode).sort();
  if (codes.length === 0) rows.push(['failed', '0']);
  for (const [code, n] of codes) rows.push([`failed: ${code}`, String(n)]);
  rows.push(['wall time', `${s.seconds.toFixed(1)} s`]);
  rows.push(['throughput', `${s.throughput.toFixed(0)} results/s`]);
  rows.push(['latency p50 (submit → result)', `${s.p50Ms.toFixed(0)} ms`]);
  rows.push(['latency p99 (submit → result)', `${s.p99Ms.toFixed(0)} ms`]);
  for (const [t, p] of Object.entries(s.peak)) {
    rows.push([`peak concurrency ${t}`, `${p} / limit ${s.limit}${p > s.limit ? '  OVER LIMIT' : ''}`]);
  }
  const w = Math.max(...rows.map(([k]) => k.length));
  const v = Math.max(...rows.map(([, x]) => x.length));
  const line = `+-${'-'.repeat(w)}-+-${'-'.repeat(v)}-+`;
  return [line, ...rows.map(([k, x]) => `| ${k.padEnd(w)} | ${x.padEnd(v)} |`), line].join('\n');
}
