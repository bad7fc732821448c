// `q-dispatcher demo --saturation`: the same backlog drained twice into a simulated vLLM-like
// model server, once behind an `endpoint-scrape` gate at 0.8 and once without it, with the
// server's saturation over time drawn in the terminal and the latency of interactive requests
// sent straight to the server.
import { RequestStore } from '@q/store';
import { popResults, submitRequests } from './client/producer.js';
import { freshSchema, startEmbedded } from './embedded.js';
import { Dispatcher } from './service/dispatcher.js';
import { Probe, startModelServer, type SaturationPoint } from './sim/model-server.js';
import { saturationConfig } from './sim/saturation-config.js';

/** Options of {@link runSaturationDemo}. */
export interface SaturationDemoOptions {
  /** Requests drained per run (default 3000). */
  requests: number;
  dsn?: string;
  dataDir?: string;
  out: NodeJS.WritableStream;
}

/** One run's figures. */
export interface SaturationRun {
  gated: boolean;
  seconds: number;
  maxSaturation: number;
  p99Ms: number;
  timeline: SaturationPoint[];
}

const SCHEMA = 'q_demo_sat';
const CAPACITY = 96;
const THRESHOLD = 0.8;

/** Runs both scenarios and prints the charts; resolves with the two runs. */
export async function runSaturationDemo(opts: SaturationDemoOptions): Promise<{ unloadedP99Ms: number; runs: SaturationRun[] }> {
  const log = (line: string) => opts.out.write(`${line}\n`);
  const cleanups: Array<() => Promise<unknown>> = [];
  try {
    let dsn = opts.dsn;
    if (!dsn) {
      log('starting the embedded PostgreSQL (data under .q/) …');
      const embedded = await startEmbedded(opts.dataDir);
      cleanups.push(() => embedded.stop());
      dsn = await freshSchema(embedded, SCHEMA);
    }
    const server = await startModelServer({ capacity: CAPACITY, latencyMs: [140, 160], slowdown: 0.2 });
    cleanups.push(() => server.close());
    const producer = await RequestStore.open(dsn, { maxConns: 2, applicationName: 'q-demo-producer' });
    cleanups.push(() => producer.close());
    log(`simulated model server ${server.url}: ${CAPACITY} slots, 140–160 ms, slower as it fills, requests beyond capacity wait`);
    const warm = new Probe();
    warm.start(server.url, 20);
    await new Promise((r) => setTimeout(r, 2000));
    const unloaded = warm.stop();
    const runs: SaturationRun[] = [];
    for (const gated of [true, false]) {
      const queue = gated ? 'sat-gated' : 'sat-open';
      log(`\n${gated ? `with an endpoint-scrape gate at ${THRESHOLD}` : 'without a gate'}: draining ${opts.requests} requests …`);
      const deadline = Math.floor(Date.now() / 1000) + 600;
      for (let i = 0; i < opts.requests; i += 1000) {
        const chunk = Array.from({ length: Math.min(1000, opts.requests - i) }, (_, j) => ({
          id: `${queue}-${i + j}`,
          deadline,
          payload: { model: 'sim', prompt: 'batch' },
        }));
        await submitRequests(producer, chunk, { queue, route: `${queue}-out` });
      }
      const config = saturationConfig({
        dsn,
        queue,
        serverUrl: server.url,
        capacity: CAPACITY,
        threshold: THRESHOLD,
        gated,
        leaseTtlSeconds: 10,
        batchSize: 32,
      });
      server.resetStats();
      const probe = new Probe();
      probe.start(server.url, 20);
      const t0 = Date.now();
      const d = await Dispatcher.start({ config });
      let got = 0;
      const end = Date.now() + 180_000;
      while (got < opts.requests && Date.now() < end) {
        const rows = await popResults(producer, `${queue}-out`, 1000);
        got += rows.length;
        if (rows.length === 0) await new Promise((r) => setTimeout(r, 200));
      }
      const seconds = (Date.now() - t0) / 1000;
      const p = probe.stop();
      await d.stop();
      const run = { gated, seconds, maxSaturation: server.maxSaturation(), p99Ms: p.p99, timeline: [...server.timeline()] };
      runs.push(run);
      log(chart(run.timeline, THRESHOLD));
      log(
        `  ${got}/${opts.requests} results in ${seconds.toFixed(1)} s; max saturation ${run.maxSaturation.toFixed(2)}; interactive p99 ${p.p99.toFixed(0)} ms (${(p.p99 / unloaded.p99).toFixed(2)}× unloaded ${unloaded.p99.toFixed(0)} ms)`,
      );
    }
    return { unloadedP99Ms: unloaded.p99, runs };
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  }
}

/** Saturation over time as a small terminal chart; `-` marks the threshold. */
export function chart(points: SaturationPoint[], threshold: number, width = 60, height = 10): string {
  if (points.length === 0) return '  (no samples)';
  const top = Math.max(1, Math.ceil(Math.max(...points.map((p) => p.saturation)) * 2) / 2);
  const cols = Array.from({ length: width }, (_, c) => {
    const slice = points.slice(
      Math.floor((c * points.length) / width),
      Math.max(Math.floor(((c + 1) * points.length) / width), Math.floor((c * points.length) / width) + 1),
    );
    return Math.max(...slice.map((p) => p.saturation));
  });
  const lines: string[] = [];
  for (let row = height; row >= 1; row--) {
    const lo = ((row - 1) / height) * top;
    const hi = (row / height) * top;
    const mark = threshold > lo && threshold <= hi;
    const label = row === height ? top.toFixed(1).padStart(4) : mark ? threshold.toFixed(1).padStart(4) : '    ';
    lines.push(`${label} |${cols.map((v) => (v > lo ? '█' : mark ? '-' : ' ')).join('')}`);
  }
  const secs = ((points.at(-1)?.t ?? 0) / 1000).toFixed(0);
  lines.push(`   0 +${'-'.repeat(width)} ${secs} s`);
  return lines.join('\n');
}
