#!/usr/bin/env node
// q-dispatcher: the reference async inference dispatcher's command line.
//   run | submit | results --route R [--follow] | cancel ID… | status | demo
import fs from 'node:fs';
import readline from 'node:readline';
import { parseArgs } from 'node:util';
import cliProgress from 'cli-progress';
import { pino } from 'pino';
import { startTelemetry } from '@q/otel/sdk';
import { isQError, redactDsn } from '@q/schema';
import { Store } from '@q/store';
import type { EmbeddedPostgres } from '@q/devdb';
import { loadConfig, OVERRIDABLE } from './config/load.js';
import type { DispatcherConfig } from './config/schema.js';
import { DEFAULT_QUEUE, popResults, submitRequests } from './client/producer.js';
import { formatSummary, runDemo } from './demo.js';
import { runSaturationDemo } from './demo-saturation.js';
import { routeProblem } from './formats.js';
import { clearRunState, DEFAULT_DATA_DIR, readRunState, startEmbedded, writeRunState } from './embedded.js';
import { DEFAULT_ROUTE } from './pipeline/handler.js';
import { Dispatcher } from './service/dispatcher.js';
import { simulated, startInferenceServer, type InferenceServer } from './sim/server.js';
import { formatStatus, queueStatus } from './status.js';

const USAGE = `usage: q-dispatcher <command> [options]

commands:
  run                      run the dispatcher (no DSN: embedded Postgres under .q/ + simulated endpoint)
  submit [--file F]        enqueue JSONL requests from F or stdin (progress bar on stderr)
  results --route R        print results of route R as JSONL; --follow keeps polling
  cancel ID…               cancel requests by id
  status                   backlog, expiring soon, partitions by owner, results waiting
  demo                     the whole pipeline on the embedded Postgres, with a summary table

common options:
  --config FILE            YAML or JSON configuration (env Q_CONFIG)
  --dsn URL                Postgres DSN (env Q_DSN / SQL_URL); overrides the config
  --queue NAME, --route NAME
  --<field> VALUE          override any top-level config field (--concurrency 32, --lease-ttl-seconds 10 …)
  --log-level LEVEL        run: pino level (default info)

demo options: --requests N (2000) --tenants N (3) --limit N (8) --data-dir DIR (.q/pgdata)
              --latency-ms A-B (20-80) --rate-429 X (0.03) --rate-503 X (0.02) --deadline-seconds N (60)
              --saturation: drain --requests (3000) into a saturating model server with and without
              an endpoint-scrape gate; charts the server's saturation over time
run options:  --igw-base-url URL (no config file: the endpoint of the default queue; absent: simulated)
              --data-dir DIR`;

const overrideOptions = Object.fromEntries(
  OVERRIDABLE.filter((f) => f !== 'url').map((f) => [f.replace(/_/g, '-'), { type: 'string' as const }]),
);

const options = {
  ...overrideOptions,
  config: { type: 'string' },
  dsn: { type: 'string' },
  queue: { type: 'string' },
  route: { type: 'string' },
  file: { type: 'string' },
  follow: { type: 'boolean' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
  saturation: { type: 'boolean' },
  requests: { type: 'string' },
  tenants: { type: 'string' },
  'data-dir': { type: 'string' },
  'igw-base-url': { type: 'string' },
  'latency-ms': { type: 'string' },
  'rate-429': { type: 'string' },
  'rate-503': { type: 'string' },
  'deadline-seconds': { type: 'string' },
  'log-level': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

function parse() {
  try {
    return parseArgs({ allowPositionals: true, strict: true, options });
  } catch (err) {
    process.stderr.write(`q-dispatcher: ${(err as Error).message}\n\n${USAGE}\n`);
    process.exit(2);
  }
}
const { values: flags, positionals } = parse();

function num(name: string, fallback: number, min = 0): number {
  const raw = flags[name as keyof typeof flags];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (typeof raw !== 'string' || !Number.isFinite(n) || n < min) throw new UsageError(`--${name} must be a number >= ${min}`);
  return n;
}

class UsageError extends Error {}

function overrides(): Record<string, string | undefined> {
  const o: Record<string, string | undefined> = {};
  for (const k of Object.keys(overrideOptions)) o[k] = flags[k as keyof typeof flags] as string | undefined;
  if (flags.dsn) o.dsn = flags.dsn;
  return o;
}

/** The configuration for client commands: file if any, else just the DSN and the named queue. */
function clientConfig(): DispatcherConfig {
  const file = flags.config ?? process.env.Q_CONFIG;
  const queue = flags.queue ?? DEFAULT_QUEUE;
  const cfg = loadConfig({
    file,
    document: { queues: [{ queue_name: queue, igw_base_url: 'http://127.0.0.1/' }] },
    overrides: overrides(),
  });
  if (!cfg.url) {
    const state = readRunState();
    if (!state) throw new UsageError('no database: pass --dsn (or Q_DSN / a config url), or start `q-dispatcher run` with the embedded default first');
    cfg.url = state.dsn;
  }
  return cfg;
}

function target(cfg: DispatcherConfig): { queue: string; route: string } {
  const q = (flags.queue ? cfg.queues.find((x) => x.queue_name === flags.queue) : cfg.queues[0]) ?? cfg.queues[0];
  const queue = flags.queue ?? q?.queue_name ?? DEFAULT_QUEUE;
  return { queue, route: flags.route ?? q?.result_queue_name ?? DEFAULT_ROUTE };
}

async function withStore<T>(cfg: DispatcherConfig, fn: (s: Store) => Promise<T>): Promise<T> {
  const store = await Store.open(cfg.url as string, { maxConns: 2, applicationName: 'q-dispatcher-cli' });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

async function cmdRun(): Promise<void> {
  const logger = pino({ level: flags['log-level'] ?? 'info', base: { svc: 'q-dispatcher' } }, pino.destination(2));
  const file = flags.config ?? process.env.Q_CONFIG;
  let sim: InferenceServer | undefined;
  let embedded: EmbeddedPostgres | undefined;
  let document: Record<string, unknown> | undefined;
  if (!file) {
    let igw = flags['igw-base-url'];
    if (!igw) {
      sim = await startInferenceServer({ behaviour: simulated(), record: false });
      igw = sim.url;
      logger.info({ url: sim.url }, 'simulated inference endpoint started');
    }
    document = { queues: [{ queue_name: flags.queue ?? DEFAULT_QUEUE, igw_base_url: igw, ...(flags.route ? { result_queue_name: flags.route } : {}) }] };
  }
  const config = loadConfig({ file, document, overrides: overrides() });
  if (!config.url) {
    embedded = await startEmbedded(flags['data-dir'] ?? DEFAULT_DATA_DIR);
    config.url = embedded.dsn;
    writeRunState(embedded.dsn);
    logger.info({ dsn: embedded.dsn, dataDir: embedded.dataDir }, 'embedded PostgreSQL started');
  }
  // Tracing only when an OTLP collector is configured (docs/design/dispatcher.md#start-and-graceful-stop); metrics are always on /metrics.
  const otlp = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const telemetry = otlp ? startTelemetry({ serviceName: process.env.OTEL_SERVICE_NAME || 'q-dispatcher', otlpEndpoint: otlp }) : undefined;
  const dispatcher = await Dispatcher.start({ config, logger, tracerProvider: telemetry?.tracerProvider });
  logger.info({ owner: dispatcher.owner, healthPort: dispatcher.healthPort, metricsPort: dispatcher.metricsPort, dsn: redactDsn(config.url) }, 'ready');
  await new Promise<void>((resolve) => {
    const onSignal = (sig: string) => {
      logger.info({ signal: sig }, 'stopping');
      resolve();
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  });
  const stats = await dispatcher.stop();
  logger.info({ stats }, 'stopped');
  await sim?.close();
  await telemetry?.shutdown().catch(() => undefined);
  if (embedded) {
    clearRunState();
    await embedded.stop();
  }
}

async function readLines(): Promise<Array<{ line: number; text: string }>> {
  const input = flags.file ? fs.createReadStream(flags.file) : process.stdin;
  const rl = readline.createInterface({ input, crlfDelay: Infinity });
  const out: Array<{ line: number; text: string }> = [];
  let n = 0;
  for await (const text of rl) {
    n++;
    if (text.trim()) out.push({ line: n, text });
  }
  return out;
}

async function cmdSubmit(): Promise<void> {
  const cfg = clientConfig();
  const { queue, route } = target(cfg);
  // Refuse a bad route before reading anything: it would be accepted by the queue and only fail
  // when the result is written, after the request ran.
  const badRoute = routeProblem(route);
  if (badRoute) throw new UsageError(`submit: --route ${badRoute}`);
  const lines = await readLines();
  const reqs = lines.map(({ line, text }) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new UsageError(`line ${line}: not valid JSON`);
    }
  });
  const batch = Math.max(1, Math.floor(num('batch-size', 500, 1)));
  const bar = process.stderr.isTTY ? new cliProgress.SingleBar({ stream: process.stderr, format: ' submit {bar} {value}/{total}' }, cliProgress.Presets.shades_classic) : undefined;
  await withStore(cfg, async (store) => {
    bar?.start(reqs.length, 0);
    for (let i = 0; i < reqs.length; i += batch) {
      try {
        await submitRequests(store, reqs.slice(i, i + batch), { queue, route });
      } catch (err) {
        bar?.stop();
        if (isQError(err)) throw new UsageError(`${err.message} (requests ${i + 1}–${Math.min(reqs.length, i + batch)}; earlier batches were submitted)`);
        throw err;
      }
      bar?.update(Math.min(reqs.length, i + batch));
    }
    bar?.stop();
  });
  process.stdout.write(`submitted ${reqs.length} requests to queue ${queue} (results on route ${route})\n`);
}

async function cmdResults(): Promise<void> {
  const cfg = clientConfig();
  const { route } = target(cfg);
  if (!flags.route && !flags.config) throw new UsageError('results: --route R is required');
  const limit = Math.floor(num('limit', 100, 1));
  let stop = false;
  process.once('SIGINT', () => (stop = true));
  process.once('SIGTERM', () => (stop = true));
  await withStore(cfg, async (store) => {
    do {
      const rows = await popResults(store, route, limit);
      for (const { result } of rows) process.stdout.write(`${JSON.stringify(result)}\n`);
      if (!flags.follow) break;
      if (rows.length === 0) await new Promise((r) => setTimeout(r, cfg.poll_interval_ms));
    } while (!stop);
  });
}

async function cmdCancel(ids: string[]): Promise<void> {
  if (ids.length === 0) throw new UsageError('cancel: give at least one request id');
  const cfg = clientConfig();
  await withStore(cfg, (store) => store.cancel(ids));
  process.stdout.write(`cancelled ${ids.length} request id(s)\n`);
}

async function cmdStatus(): Promise<void> {
  const cfg = clientConfig();
  const queues = flags.queue
    ? [target(cfg)]
    : cfg.queues.map((q) => ({ queue: q.queue_name, route: flags.route ?? q.result_queue_name ?? DEFAULT_ROUTE }));
  const status = await withStore(cfg, (store) => queueStatus(store, queues));
  process.stdout.write(`${flags.json ? JSON.stringify(status, null, 2) : formatStatus(status)}\n`);
}

async function cmdDemo(): Promise<void> {
  if (flags.saturation) {
    const r = await runSaturationDemo({
      requests: Math.floor(num('requests', 3000, 1)),
      dsn: flags.dsn ?? process.env.Q_DSN ?? process.env.SQL_URL,
      dataDir: flags['data-dir'],
      out: process.stdout,
    });
    const [gated, open] = r.runs;
    if (!gated || !open) throw new Error('demo: the saturation demo must report a gated and an open run');
    process.stdout.write(
      `\nwith the gate: max saturation ${gated.maxSaturation.toFixed(2)}, interactive p99 ${(gated.p99Ms / r.unloadedP99Ms).toFixed(2)}× unloaded; ` +
        `without: ${open.maxSaturation.toFixed(2)}, ${(open.p99Ms / r.unloadedP99Ms).toFixed(2)}×\n`,
    );
    return;
  }
  const [lo, hi] = (flags['latency-ms'] ?? '20-80').split('-').map(Number);
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) throw new UsageError('--latency-ms must look like 20-80');
  const dsn = flags.dsn ?? process.env.Q_DSN ?? process.env.SQL_URL;
  const limit = Math.floor(num('limit', 8, 1));
  const summary = await runDemo({
    requests: Math.floor(num('requests', 2000, 1)),
    tenants: Math.floor(num('tenants', 3, 1)),
    limit,
    dsn,
    dataDir: flags['data-dir'],
    latencyMs: [lo as number, hi as number],
    rate429: num('rate-429', 0.03),
    rate503: num('rate-503', 0.02),
    concurrency: Math.floor(num('concurrency', 64, 1)),
    deadlineSeconds: Math.floor(num('deadline-seconds', 60, 1)),
    out: process.stderr,
  });
  process.stdout.write(`${formatSummary(summary)}\n`);
  const over = Object.values(summary.peak).some((p) => p > limit);
  if (summary.results !== summary.submitted || over) process.exitCode = 1;
}

async function main(): Promise<void> {
  const [cmd, ...rest] = positionals;
  if (flags.help || !cmd) {
    process.stdout.write(`${USAGE}\n`);
    if (!cmd && !flags.help) process.exitCode = 2;
    return;
  }
  switch (cmd) {
    case 'run':
      return cmdRun();
    case 'submit':
      return cmdSubmit();
    case 'results':
      return cmdResults();
    case 'cancel':
      return cmdCancel(rest);
    case 'status':
      return cmdStatus();
    case 'demo':
      return cmdDemo();
    default:
      throw new UsageError(`unknown command ${JSON.stringify(cmd)}\n\n${USAGE}`);
  }
}

main().catch((err: unknown) => {
  const msg = err instanceof UsageError || isQError(err) ? (err as Error).message : redactDsn(String((err as Error)?.stack ?? err));
  process.stderr.write(`q-dispatcher: ${msg}\n`);
  process.exitCode = err instanceof UsageError || isQError(err) ? 2 : 1;
});
