import { startEmbeddedPostgres, type EmbeddedPostgres } from '@q/devdb';
import { JobQueue, Worker } from '@q/job-worker';
import { jobMetrics, qTracer } from '@q/otel';
import type { Telemetry } from '@q/otel/sdk';
import { JobStore } from '@q/store';
import { buildAdminServer } from './api/server.js';
import { KNOWN_QUEUES, type WorkerConfig } from './config.js';
import { builtinHandlers, type HandlerMap } from './handlers/index.js';
import { childLogger, silentLogger, type Logger } from './logger.js';
import { purgeTargets } from './purge-targets.js';
import { startPurgeScheduler } from './scheduler.js';
import { VERSION } from './version.js';

/** A running worker process: queue consumer, admin API and purge scheduler. */
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

    const worker = new Worker(store, {
      queues: config.queues,
      concurrency: config.concurrency,
      logger: childLogger(log, { component: 'worker' }),
      metrics: telemetry ? jobMetrics(telemetry.meterProvider) : undefined,
      tracer: telemetry ? qTracer(telemetry.tracerProvider) : undefined,
      retryBaseMs: config.retryBaseMs,
    });
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
    for (const [type, handler] of Object.entries(handlers)) worker.register(type, handler);
    if (config.webhookSecret === undefined) log.warn({}, 'AKERDOCK_WEBHOOK_SECRET is not set: webhook.deliver jobs will dead-letter');

    const stopConsuming = new AbortController();
    const running = worker.run(stopConsuming.signal);
    let draining = false;

    const scheduler =
      config.purgeIntervalMs > 0 && config.queues.includes('maintenance')
        ? startPurgeScheduler(queue, config.purgeIntervalMs, childLogger(log, { component: 'scheduler' }))
        : undefined;

    const api = buildAdminServer({
      jobs: queue,
      token: config.adminToken,
      host: config.host,
      allowedHosts: config.allowedHosts,
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
    await api.listen({ host: config.host, port: config.port });
    const addr = api.server.address();
    const port = typeof addr === 'object' && addr ? addr.port : config.port;
    const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
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
          scheduler?.stop();
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
