#!/usr/bin/env node
// q-dispatcher: the reference async inference dispatcher's command line.
//   run | submit | results --route R [--follow] | cancel ID… | status | demo | help CMD
import fs from 'node:fs';
import readline from 'node:readline';
import { parseArgs } from 'node:util';
import cliProgress from 'cli-progress';
import { startTelemetry, type Telemetry } from '@q/otel/sdk';
import { isQError, redactDsn } from '@q/schema';
import { withTransaction } from '@q/schema/internal';
import type { RequestStore } from '@q/store';
import type { EmbeddedPostgres } from '@q/devdb';
import { loadConfig, OVERRIDABLE } from './config/load.js';
import type { DispatcherConfig } from './config/schema.js';
import { DEFAULT_KEY_GATES, DEFAULT_QUEUE, peekResults, popResults, submitRequests } from './client/producer.js';
import { quotaKeyProblem } from './pipeline/envelope-check.js';
import { checkDatabase, withExistingStore } from './cli/database.js';
import { formatSummary, runDemo } from './demo.js';
import { runSaturationDemo } from './demo-saturation.js';
import { routeProblem, validateRequest } from './formats.js';
import { createCliLogger, LOG_FORMATS, LOG_LEVELS, type LogFormat } from './cli/log.js';
import { helpFor, USAGE } from './cli/usage.js';
import { clearRunState, DEFAULT_DATA_DIR, readRunState, startEmbedded, writeRunState } from './embedded.js';
import { DEFAULT_ROUTE } from './pipeline/handler.js';
import { Dispatcher, dispatcherServiceName } from './service/dispatcher.js';
import { VERSION } from './version.js';
import { simulated, startInferenceServer, type InferenceServer } from './sim/server.js';
import { formatStatus, queueStatus } from './status.js';

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
  peek: { type: 'boolean' },
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
  'log-format': { type: 'string' },
  migrate: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const;

function parse() {
  try {
    return parseArgs({ allowPositionals: true, strict: true, options });
  } catch (err) {
    process.stderr.write(`q-dispatcher: ${(err as Error).message}\n\n${helpFor(process.argv.slice(2).find((a) => !a.startsWith('-')))}\n`);
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
    if (!state)
      throw new UsageError('no database: pass --dsn (or Q_DSN / a config url), or start `q-dispatcher run` with the embedded default first');
    cfg.url = state.dsn;
  }
  return cfg;
}

function target(cfg: DispatcherConfig): { queue: string; route: string } {
  const q = (flags.queue ? cfg.queues.find((x) => x.queue_name === flags.queue) : cfg.queues[0]) ?? cfg.queues[0];
  const queue = flags.queue ?? q?.queue_name ?? DEFAULT_QUEUE;
  return { queue, route: flags.route ?? q?.result_queue_name ?? DEFAULT_ROUTE };
}

function withStore<T>(cfg: DispatcherConfig, command: string, fn: (s: RequestStore) => Promise<T>): Promise<T> {
  const placement = { ...(cfg.pooler ? { pooler: cfg.pooler } : {}), ...(cfg.schema !== undefined ? { schema: cfg.schema } : {}) };
  return withExistingStore(cfg.url as string, { command, migrate: flags.migrate === true, ...placement }, fn);
}

function oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
  const raw = flags[name as keyof typeof flags];
  if (raw === undefined) return fallback;
  if (typeof raw !== 'string' || !allowed.includes(raw as T))
    throw new UsageError(`--${name} must be one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}`);
  return raw as T;
}

async function cmdRun(): Promise<void> {
  const level = oneOf('log-level', LOG_LEVELS, 'info');
  const format = oneOf<LogFormat>('log-format', LOG_FORMATS, 'auto');
  const logger = createCliLogger({ level, format, isTTY: process.stderr.isTTY === true });
  const file = flags.config ?? process.env.Q_CONFIG;
  let sim: InferenceServer | undefined;
  let embedded: EmbeddedPostgres | undefined;
  let telemetry: Telemetry | undefined;
  let dispatcher: Dispatcher | undefined;
  // Whatever started before a failure is stopped again: a simulated endpoint or an embedded
  // server left running would keep the process alive after the error (it used to hang).
  try {
    let document: Record<string, unknown> | undefined;
    if (!file) {
      let igw = flags['igw-base-url'];
      if (!igw) {
        sim = await startInferenceServer({ behaviour: simulated(), record: false });
        igw = sim.url;
        logger.info({ url: sim.url }, 'simulated inference endpoint started');
      }
      document = {
        queues: [{ queue_name: flags.queue ?? DEFAULT_QUEUE, igw_base_url: igw, ...(flags.route ? { result_queue_name: flags.route } : {}) }],
      };
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
    telemetry = otlp ? startTelemetry({ serviceName: dispatcherServiceName(), serviceVersion: VERSION, otlpEndpoint: otlp }) : undefined;
    dispatcher = await Dispatcher.start({ config, logger, tracerProvider: telemetry?.tracerProvider });
    logger.info(
      { owner: dispatcher.owner, healthPort: dispatcher.healthPort, metricsPort: dispatcher.metricsPort, dsn: redactDsn(config.url) },
      'ready',
    );
    // Until a signal, or a persistent failure that stopped the dispatcher by itself: then the
    // process must not look like a clean stop (exit 0) to a supervisor restarting on failure.
    const failure = await Promise.race([
      new Promise<undefined>((resolve) => {
        const onSignal = (sig: string) => {
          logger.info({ signal: sig }, 'stopping');
          resolve(undefined);
        };
        process.once('SIGTERM', onSignal);
        process.once('SIGINT', onSignal);
      }),
      dispatcher.failure,
    ]);
    const stats = await dispatcher.stop();
    logger.info({ stats }, 'stopped');
    if (failure) {
      process.exitCode = 1;
      process.stderr.write(`q-dispatcher: stopped after a persistent failure: ${redactDsn(failure.message)}\n`);
    }
  } finally {
    await sim?.close().catch(() => undefined);
    await telemetry?.shutdown().catch(() => undefined);
    if (embedded) {
      clearRunState();
      await embedded.stop().catch(() => undefined);
    }
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
  // The queue's quota keys when a config names the queue, else the documented default key.
  const configured = (flags.config ?? process.env.Q_CONFIG) ? cfg.queues.find((q) => q.queue_name === queue) : undefined;
  const gates = configured ? configured.gates : DEFAULT_KEY_GATES;
  // Refuse a bad route before reading anything: it would be accepted by the queue and only fail
  // when the result is written, after the request ran.
  const badRoute = routeProblem(route);
  if (badRoute) throw new UsageError(`submit: --route ${badRoute}`);
  const lines = await readLines();
  // Every line is checked before anything is written: a bad line 700 must not leave 699 behind.
  const now = Math.floor(Date.now() / 1000);
  const reqs = lines.map(({ line, text }) => {
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      throw new UsageError(`submit: line ${line}: not valid JSON; nothing was submitted`);
    }
    try {
      const req = validateRequest(raw, now);
      const bad = quotaKeyProblem(gates, req.metadata);
      if (bad) throw new Error(`request ${JSON.stringify(req.id)}: ${bad}`);
    } catch (err) {
      throw new UsageError(`submit: line ${line}: ${(err as Error).message}; nothing was submitted`);
    }
    return raw;
  });
  // Two requests with one id in one file are two generations of one request: a later cancel or
  // result cannot tell them apart, so a file that names an id twice is refused whole.
  const linesOf = new Map<string, number[]>();
  reqs.forEach((raw, i) => {
    const id = (raw as { id: string }).id;
    linesOf.set(id, [...(linesOf.get(id) ?? []), (lines[i] as { line: number }).line]);
  });
  const dups = [...linesOf].filter(([, at]) => at.length > 1);
  if (dups.length > 0) {
    const named = dups.map(([id, at]) => `${JSON.stringify(id)} (lines ${at.join(', ')})`).join(', ');
    throw new UsageError(`submit: duplicate request id(s): ${named}; nothing was submitted`);
  }
  const batch = Math.max(1, Math.floor(num('batch-size', 500, 1)));
  const bar = process.stderr.isTTY
    ? new cliProgress.SingleBar({ stream: process.stderr, format: ' submit {bar} {value}/{total}' }, cliProgress.Presets.shades_classic)
    : undefined;
  const served = await withStore(cfg, 'submit', async (store) => {
    bar?.start(reqs.length, 0);
    try {
      // One transaction for all batches: they are written together or not at all.
      await withTransaction(store.pool, async (client) => {
        const inTx = { enqueue: (rows: Parameters<RequestStore['enqueue']>[0]) => store.enqueue(rows, { client }) };
        for (let i = 0; i < reqs.length; i += batch) {
          await submitRequests(inTx, reqs.slice(i, i + batch), { queue, route, gates });
          bar?.update(Math.min(reqs.length, i + batch));
        }
      });
    } catch (err) {
      if (isQError(err)) throw new UsageError(`submit: ${err.message}; nothing was submitted`);
      throw err;
    } finally {
      bar?.stop();
    }
    // A dispatcher serving a queue leases its partitions, and each lease bumps the partition's
    // epoch: no epoch above 0 means no dispatcher has ever served it here (a typo in --queue, or
    // the wrong database).
    return (await store.partitionOwners(queue)).some((o) => o.maxEpoch > 0);
  });
  process.stdout.write(`submitted ${reqs.length} requests to queue ${queue} (results on route ${route})\n`);
  if (!served) {
    process.stderr.write(
      `q-dispatcher: warning: no dispatcher has served queue ${JSON.stringify(queue)} in this database yet; ` +
        'the requests wait until `q-dispatcher run` serves it (check --queue and --dsn)\n',
    );
  }
}

async function cmdResults(): Promise<void> {
  const cfg = clientConfig();
  const { route } = target(cfg);
  if (!flags.route && !flags.config) throw new UsageError('results: --route R is required');
  if (flags.peek && flags.follow) throw new UsageError('results: --peek reads once; it does not go with --follow');
  const limit = Math.floor(num('limit', 100, 1));
  let stop = false;
  process.once('SIGINT', () => (stop = true));
  process.once('SIGTERM', () => (stop = true));
  await withStore(cfg, 'results', async (store) => {
    if (flags.peek) {
      const rows = await peekResults(store, route, limit);
      for (const { result } of rows) process.stdout.write(`${JSON.stringify(result)}\n`);
      return;
    }
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
  const asked = [...new Set(ids)];
  // An id the store would refuse (empty, NUL, too long) must not fail the valid ones with it:
  // those are cancelled, the rest reported, and the exit status (2) says something was refused.
  const invalid = new Map(asked.flatMap((id) => (routeProblem(id) ? [[id, routeProblem(id) as string] as const] : [])));
  const valid = asked.filter((id) => !invalid.has(id));
  const done = new Set(valid.length > 0 ? await withStore(cfg, 'cancel', (store) => store.cancel(valid)) : []);
  for (const id of asked) {
    const bad = invalid.get(id);
    if (bad) process.stdout.write(`invalid        ${JSON.stringify(id)} (a request id ${bad})\n`);
    else process.stdout.write(done.has(id) ? `cancelled      ${id}\n` : `not cancelled  ${id} (no request with this id, or already cancelled)\n`);
  }
  process.stdout.write(`cancelled ${done.size} of ${asked.length} request id(s)${invalid.size > 0 ? `; ${invalid.size} invalid` : ''}\n`);
  // 2: an id was refused as given; 1: a valid id had nothing to cancel (unknown or already cancelled).
  const missed = valid.filter((id) => !done.has(id));
  if (invalid.size > 0) process.exitCode = 2;
  else if (missed.length > 0) {
    process.stderr.write(
      `q-dispatcher: cancel: not cancelled: ${missed.map((id) => JSON.stringify(id)).join(', ')} (unknown, or already cancelled)\n`,
    );
    process.exitCode = 1;
  }
}

async function cmdStatus(): Promise<void> {
  const cfg = clientConfig();
  const queues = flags.queue
    ? [target(cfg)]
    : cfg.queues.map((q) => ({ queue: q.queue_name, route: flags.route ?? q.result_queue_name ?? DEFAULT_ROUTE }));
  const status = await withStore(cfg, 'status', (store) => queueStatus(store, queues));
  process.stdout.write(`${flags.json ? JSON.stringify(status, null, 2) : formatStatus(status)}\n`);
}

async function cmdDemo(): Promise<void> {
  const dsn = flags.dsn ?? process.env.Q_DSN ?? process.env.SQL_URL;
  // The embedded demo makes its own fresh schema; a given database gets tables only with --migrate.
  // (--saturation gates by an endpoint scrape only: no quota tables.)
  if (dsn !== undefined)
    await checkDatabase(dsn, flags.saturation ? ['requests'] : ['requests', 'quota'], { command: 'demo', migrate: flags.migrate === true });
  if (flags.saturation) {
    const r = await runSaturationDemo({
      requests: Math.floor(num('requests', 3000, 1)),
      dsn,
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

const COMMANDS: Record<string, (rest: string[]) => Promise<void>> = {
  run: () => cmdRun(),
  submit: () => cmdSubmit(),
  results: () => cmdResults(),
  cancel: (rest) => cmdCancel(rest),
  status: () => cmdStatus(),
  demo: () => cmdDemo(),
};

async function main(): Promise<void> {
  const [cmd, ...rest] = positionals;
  if (flags.version) {
    process.stdout.write(`q-dispatcher ${VERSION}\n`);
    return;
  }
  if (cmd === 'help') {
    const topic = rest[0];
    if (topic !== undefined && !(topic in COMMANDS)) throw new UsageError(`help: unknown command ${JSON.stringify(topic)}\n\n${USAGE}`);
    process.stdout.write(`${helpFor(topic)}\n`);
    return;
  }
  if (flags.help || !cmd) {
    process.stdout.write(`${helpFor(cmd !== undefined && cmd in COMMANDS ? cmd : undefined)}\n`);
    if (!cmd && !flags.help) process.exitCode = 2;
    return;
  }
  const run = COMMANDS[cmd];
  if (!run) throw new UsageError(`unknown command ${JSON.stringify(cmd)}\n\n${USAGE}`);
  return run(rest);
}

main().then(
  () => {
    // A command that is done leaves nothing to wait for; a stray handle (a pool's timer, a
    // socket) must not keep the process alive after its answer.
    if (positionals[0] !== 'results' || !flags.follow) exitSoon();
  },
  (err: unknown) => {
    // The cause once, on one line; its stack only when --log-level debug (or trace) asks for it.
    const e = err instanceof Error ? err : new Error(String(err));
    const verbose = !(err instanceof UsageError) && (flags['log-level'] === 'debug' || flags['log-level'] === 'trace');
    process.stderr.write(`q-dispatcher: ${redactDsn(verbose ? (e.stack ?? e.message) : e.message)}\n`);
    process.exitCode = exitStatusOf(err);
    exitSoon();
  },
);

/**
 * 2 for what the operator must change before running again (flags, config, a database without
 * q's tables or of another q version), 1 for a failure while running (database unreachable,
 * permission denied): the convention of both apps (docs/deployment.md#exit-codes).
 */
function exitStatusOf(err: unknown): number {
  if (err instanceof UsageError) return 2;
  return isQError(err) && ['CONFIG', 'INVALID_ARGUMENT', 'UNSUPPORTED_DSN', 'SCHEMA_MISMATCH'].includes(err.code) ? 2 : 1;
}

/** Exits once stdout and stderr are flushed, with the status set so far. */
function exitSoon(): void {
  let pending = 2;
  const done = () => {
    if (--pending === 0) process.exit();
  };
  process.stdout.write('', done);
  process.stderr.write('', done);
}
