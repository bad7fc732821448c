import { startEmbeddedPostgres, type EmbeddedPostgres } from '@q/devdb';
import { JobQueue, Worker } from '@q/job-worker';
import { jobMetrics, qTracer } from '@q/otel';
import type { Telemetry } from '@q/otel/sdk';
import { JobStore } from '@q/store';
import { createDashboard } from '@q/dashboard';
import { buildAdminServer, DASHBOARD_PATH } from './api/server.js';
import { KNOWN_QUEUES, type WorkerConfig } from './config.js';
import { builtinHandlers, type HandlerMap } from './handlers/index.js';
import { childLogger, silentLogger, type Logger } from './logger.js';
import { applyPurgeSchedule } from './purge-schedule.js';
import { purgeTargets } from './purge-targets.js';
import { VERSION } from './version.js';

/** A running worker process: queue consumer (and schedule firing), admin API. */
export interface WorkerApp {
  /** Base URL of the admin API, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  /** The producer side, for in-process enqueues. */
  readonly queue: JobQueue;
  /**
   * Graceful stop: /readyz turns 503, no new jobs are claimed, running jobs get
   * `shutdownTimeoutMs` to finish (their outcomes recorded; the rest go back to the queue), then
   * the API, the pool, telemetry and an embedded server are closed. Idempotent.
   */
  stop(): Promise<void>;
}

/** Options of {@link startWorkerApp} beyond the config. */
export interface WorkerAppOptions {
  logger?: Logger;
  /** More handlers (or replacements of the built-in ones), by job type. */
  handlers?: HandlerMap;
}

/**
 * Starts everything the config describes. Without a DSN it first starts the embedded Postgres
 * in `config.dataDir` (the same helper as the dispatcher's demo).
 */
export async function startWorkerApp(config: WorkerConfig, opts: WorkerAppOptions = {}): Promise<WorkerApp> {
  const log = opts.logger ?? silentLogger;
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn().catch((err: Error) => log.warn({ err }, 'shutdown step failed'));
  };
  try {
    let dsn = config.dsn;
    let embedded: EmbeddedPostgres | undefined;
    if (dsn === undefined) {
      embedded = await startEmbeddedPostgres({ dataDir: config.dataDir });
      const server = embedded;
      cleanups.push(() => server.stop());
      dsn = embedded.dsn;
      log.info({ port: embedded.port, dataDir: embedded.dataDir }, 'embedded Postgres started (no DSN configured)');
    }

    let telemetry: Telemetry | undefined;
    if (config.otlpEndpoint !== undefined || config.prometheusPort !== undefined) {
      // Loaded only when asked for: the SDK and its exporters are heavy to import.
      const { startTelemetry } = await import('@q/otel/sdk');
      const t = startTelemetry({
        serviceName: config.serviceName,
        serviceVersion: VERSION,
        // Failed exports (a collector that is down) become warnings in this process's log.
        logger: childLogger(log, { component: 'telemetry' }),
        otlpEndpoint: config.otlpEndpoint,
        prometheusPort: config.prometheusPort,
      });
      telemetry = t;
      cleanups.push(() => t.shutdown());
      await t.ready;
    }

    const store = await JobStore.open(dsn, { maxConns: config.concurrency + 4, tracerProvider: telemetry?.tracerProvider });
    cleanups.push(() => store.close());
    const queue = new JobQueue(store, { knownQueues: [...KNOWN_QUEUES] });
    const purge = await purgeTargets(store.pool, queue, dsn, cleanups);
    // Before the port and the first claim: a --purge-cron the scheduler cannot read stops the start (exit 2).
    await applyPurgeSchedule(queue, config.purgeCron, config.queues.includes('maintenance'), childLogger(log, { component: 'scheduler' }));

    const handlers: HandlerMap = {
      ...builtinHandlers({
        logger: childLogger(log, { component: 'handler' }),
        webhookSecret: config.webhookSecret,
        webhookTimeoutMs: config.webhookTimeoutMs,
        notifyUrl: config.notifyUrl,
        purgeAfterMs: config.purgeAfterMs,
        purge,
      }),
      ...opts.handlers,
    };
    let draining = false;
    // Pages at /dashboard behind HTTP Basic (the admin token as the password); its actions take
    // the admin token as a bearer token (neither with --insecure-local).
    const dashboard = config.dashboard
      ? await createDashboard({
          pool: store.pool,
          schema: store.schema,
          basePath: DASHBOARD_PATH,
          ...(config.adminToken !== undefined ? { actions: { token: config.adminToken } } : {}),
        })
      : undefined;
    if (dashboard) cleanups.push(() => dashboard.close());
    const api = buildAdminServer({
      ...(dashboard ? { dashboard } : {}),
      jobs: queue,
      token: config.adminToken,
      host: config.host,
      allowedHosts: config.allowedHosts,
      types: Object.keys(handlers),
      queues: KNOWN_QUEUES,
      bodyLimit: config.bodyLimit,
      logger: childLogger(log, { component: 'api' }),
      readiness: async () => {
        if (draining) return 'draining';
        try {
          await store.now();
          return null;
        } catch {
          return 'database unreachable';
        }
      },
    });
    cleanups.push(() => api.close());
    // The port is bound before any job is claimed: a busy port ends the start with one clear
    // error and nothing leased (a worker already running would claim jobs and then see its store
    // closed under it).
    const hostPort = `${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
    await api.listen({ host: config.host, port: config.port }).catch((err: NodeJS.ErrnoException) => {
      throw new Error(`cannot listen on ${hostPort}: ${listenProblem(err)}`, { cause: err });
    });
    const addr = api.server.address();
    const port = typeof addr === 'object' && addr ? addr.port : config.port;
    const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;

    const worker = new Worker(store, {
      queues: config.queues,
      concurrency: config.concurrency,
      logger: childLogger(log, { component: 'worker' }),
      metrics: telemetry ? jobMetrics(telemetry.meterProvider) : undefined,
      tracer: telemetry ? qTracer(telemetry.tracerProvider) : undefined,
      retryBaseMs: config.retryBaseMs,
      // Deliveries to one host (the job's group, set from its URL by POST /jobs), fleet-wide.
      ...(config.webhookHostConcurrency > 0 ? { limits: [{ type: 'webhook.deliver', concurrency: config.webhookHostConcurrency }] } : {}),
      // Every worker fires the due schedules (akerdock.purge and those of PUT /schedules); no leader.
      schedules: true,
    });
    for (const [type, handler] of Object.entries(handlers)) worker.register(type, handler);
    if (config.webhookSecret === undefined) log.warn({}, 'AKERDOCK_WEBHOOK_SECRET is not set: webhook.deliver jobs will dead-letter');

    const stopConsuming = new AbortController();
    const running = worker.run(stopConsuming.signal);

    log.info(
      { url, queues: config.queues, concurrency: config.concurrency, auth: config.adminToken ? 'bearer' : 'none (insecure-local)' },
      'akerdock-worker started',
    );

    let stopping: Promise<void> | undefined;
    return {
      url,
      queue,
      stop() {
        stopping ??= (async () => {
          draining = true;
          log.info({ timeoutMs: config.shutdownTimeoutMs }, 'draining: no new jobs, waiting for running ones');
          stopConsuming.abort();
          await running;
          await worker.wait(config.shutdownTimeoutMs);
          log.info({}, 'drained');
          await cleanup();
        })();
        return stopping;
      },
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** What a failed `listen` means, in words (the errno code alone reads as a crash). */
function listenProblem(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'EADDRINUSE':
      return 'the address is already in use (another process holds the port; pick another with --listen)';
    case 'EACCES':
      return 'permission denied (ports below 1024 need privileges; pick another with --listen)';
    case 'EADDRNOTAVAIL':
      return 'this machine has no such address';
    default:
      return err.message;
  }
}
