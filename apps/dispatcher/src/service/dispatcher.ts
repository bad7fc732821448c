// The dispatcher service: one partition worker per queue over one RequestStore, quota gates through
// Quota, one keep-alive inference client, health/readiness/metrics endpoints, graceful stop.
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import type { MeterProvider, TracerProvider } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider as SdkMeterProvider } from '@opentelemetry/sdk-metrics';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { Dashboard } from '@q/dashboard';
import { runPartitionWorker, type PartitionWorkerStats } from '@q/partition-consumer';
import { createQuota, type Quota } from '@q/quota';
import { QError, QErrorCode } from '@q/schema';
import { RequestStore } from '@q/store';
import { readTlsFiles } from '../config/load.js';
import { DEFAULT_PRIORITY_HEADER, secondsToMs, type DispatcherConfig } from '../config/schema.js';
import type { ResultMessage } from '../formats.js';
import { InferenceClient, type TlsClientOptions } from '../http/client.js';
import { errInfo, silentLogger, type Logger } from '../logger.js';
import { DispatcherMetrics } from '../metrics.js';
import { VERSION } from '../version.js';
import { CancelBatcher } from '../pipeline/cancel-batcher.js';
import { createGate, type Gate } from '../gates/gates.js';
import { WorkerPool } from '../pipeline/pool.js';
import { GateMetrics } from '../gates/metrics.js';
import { MetricSources } from '../gates/sources.js';
import { createAdmission, KeyLoad, type Admission } from '../pipeline/admission.js';
import { createFailureAnswer, createHandler, type HandlerDeps } from '../pipeline/handler.js';
import type { QuotaPort } from '../pipeline/ports.js';
import { startEndpoint, type Endpoint } from './http-endpoints.js';
import { BatchMetrics } from '../batch/batch-metrics.js';
import { BatchDriver, isBatchRoute } from '../batch/driver.js';
import { AdaptiveConcurrency } from '../pipeline/adaptive-concurrency.js';
import { startBatchApi, type BatchApiServer } from '../batch/server.js';

/** Deadline-proximity windows of the backlog poll, seconds (docs/design/dispatcher.md#loops): 0, 1 s, … 24 h. */
export const PROXIMITY_WINDOWS_S = [0, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400];

/** The dispatcher's `service.name`: `explicit`, else `OTEL_SERVICE_NAME`, else `q-dispatcher`. */
export function dispatcherServiceName(explicit?: string, env: NodeJS.ProcessEnv = process.env): string {
  return explicit || env.OTEL_SERVICE_NAME || 'q-dispatcher';
}

/** Options of {@link Dispatcher.start}. */
export interface DispatcherOptions {
  /** Effective configuration; `url` is required here. */
  config: DispatcherConfig;
  logger?: Logger;
  /** Record metrics here instead of the dispatcher's own Prometheus-backed provider. */
  meterProvider?: MeterProvider;
  /**
   * `service.name` of the dispatcher's own metrics (`target_info` on `/metrics`). Default: the
   * `OTEL_SERVICE_NAME` environment variable, else `q-dispatcher`.
   */
  serviceName?: string;
  /** Spans of the store, quota and partition worker (`q.*` operations and statements). */
  tracerProvider?: TracerProvider;
  /** Called with every final result (before it is written). */
  onResult?: (queue: string, result: ResultMessage, metadata: Record<string, string> | undefined) => void;
}

/** A running dispatcher. */
export class Dispatcher {
  /** Lease owner name (`<hostname>-<8 hex>` unless configured). */
  readonly owner: string;
  /** Per-queue instruments and tallies. */
  readonly metrics = new Map<string, DispatcherMetrics>();
  /** Per-queue gate gauges (metric value, threshold, source availability, budget). */
  readonly gateMetrics = new Map<string, GateMetrics>();
  /** Worker pools by id (when configured). */
  readonly pools = new Map<string, WorkerPool>();
  /** Metric sources of the gates (cached scrapes and Prometheus queries). */
  readonly sources: MetricSources;
  /** Bound ports of `/healthz`+`/readyz` and `/metrics` (undefined when off). */
  healthPort: number | undefined;
  metricsPort: number | undefined;
  /** Bound port of the Batch API (undefined when `batch_api` is not configured). */
  batchApiPort: number | undefined;
  /** Bound port of the web dashboard (undefined when `dashboard` is not configured). */
  dashboardPort: number | undefined;

  #ready = false;
  readonly #stopCtl = new AbortController();
  readonly #runs: Array<Promise<PartitionWorkerStats | undefined>> = [];
  readonly #admissions: Admission[] = [];
  readonly #endpoints: Endpoint[] = [];
  #stopping: Promise<PartitionWorkerStats[]> | undefined;
  #batchApi: { driver: BatchDriver; server: BatchApiServer } | undefined;
  #dashboard: { dashboard: Dashboard; server: http.Server } | undefined;
  #meterOwned: SdkMeterProvider | undefined;
  #failure: Error | undefined;
  #failed: (err: Error) => void = () => undefined;
  /**
   * Settles with the error a persistent failure stopped the dispatcher with (a partition worker
   * or the quota client gave up: permission denied, schema gone…); pending while it runs well.
   * `q-dispatcher run` exits non-zero with it (docs/dispatcher.md#commands).
   */
  readonly failure: Promise<Error> = new Promise((resolve) => (this.#failed = resolve));

  readonly #config: DispatcherConfig;
  readonly #quota: Quota | undefined;
  readonly #client: InferenceClient;
  readonly #logger: Logger;

  private constructor(
    config: DispatcherConfig,
    readonly store: RequestStore,
    quota: Quota | undefined,
    client: InferenceClient,
    logger: Logger,
    tls: TlsClientOptions | undefined,
  ) {
    this.#config = config;
    this.#quota = quota;
    this.#client = client;
    this.#logger = logger;
    this.owner = config.owner ?? `${hostname()}-${randomBytes(4).toString('hex')}`;
    // The endpoints' TLS options serve the metric sources too: a scrape of the same https server must trust the same CA.
    this.sources = new MetricSources({ ttlMs: config.prometheus_cache_ttl_ms, prometheusUrl: config.prometheus_url, ...(tls ? { tls } : {}) });
    setMaxListeners(0, this.#stopCtl.signal); // every parked request listens for the stop
  }

  /** Opens the store (migrating `requests`, and `quota` when a queue has gates) and starts every queue. */
  static async start(opts: DispatcherOptions): Promise<Dispatcher> {
    const { config } = opts;
    if (!config.url) throw new Error('Dispatcher.start: config.url (the DSN) is required');
    const logger = opts.logger ?? silentLogger;
    // Before anything is opened: an unreadable TLS file fails the start cleanly.
    const tls = readTlsFiles(config);
    if (config.tls_insecure_skip_verify) {
      logger.warn(
        {},
        'TLS certificate verification is OFF (tls_insecure_skip_verify): endpoint identities are not checked; never use this in production',
      );
    }
    let meterProvider = opts.meterProvider;
    let prometheus: PrometheusExporter | undefined;
    let owned: SdkMeterProvider | undefined;
    if (!meterProvider) {
      prometheus = new PrometheusExporter({ preventServerStart: true });
      // Without a resource every series is labelled service_name="unknown_service:node".
      const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: dispatcherServiceName(opts.serviceName), [ATTR_SERVICE_VERSION]: VERSION });
      owned = new SdkMeterProvider({ resource, readers: [prometheus] });
      meterProvider = owned;
    }
    // Every store of the process shares the placement: behind a transaction pooler, unnamed
    // statements; with `schema`, every statement names it (docs/dispatcher.md#configuration).
    const placement = { ...(config.pooler ? { pooler: config.pooler } : {}), ...(config.schema !== undefined ? { schema: config.schema } : {}) };
    const store = await RequestStore.open(config.url, {
      ...placement,
      maxConns: config.max_connections,
      meterProvider,
      tracerProvider: opts.tracerProvider,
      applicationName: 'q-dispatcher',
    });
    const gated = config.queues.some((q) => q.gates.length > 0);
    let quota: Quota | undefined;
    // The quota client stops for good after repeated persistent failures: so does the dispatcher
    // (its gated requests could only go back to pending for ever).
    let onFatal: (err: Error) => void = () => undefined;
    try {
      if (gated)
        quota = await createQuota({
          ...placement,
          pool: store.pool,
          ttlMs: secondsToMs(config.lease_ttl_seconds),
          meterProvider,
          logger,
          onError: (f) => f.fatal && onFatal(f.error),
        });
    } catch (err) {
      await store.close();
      throw err;
    }
    const client = new InferenceClient({
      ...(tls ? { tls } : {}),
      connections: config.concurrency * config.queues.length,
      requestTimeoutMs: config.request_timeout_ms,
      maxResponseBytes: config.max_response_bytes,
    });
    const d = new Dispatcher(config, store, quota, client, logger, tls);
    d.#meterOwned = owned;
    onFatal = (err) => d.#fail(new QError(QErrorCode.CONFIG, `quota: ${err.message}`, { cause: err }), 'quota client stopped; stopping');
    try {
      await d.#startEndpoints(prometheus);
      d.#startQueues(meterProvider, opts.tracerProvider, opts.onResult);
      // A partition worker refuses bad options by rejecting at once: fail the start, do not
      // report ready and die later on an unhandled rejection.
      await new Promise((r) => setImmediate(r));
      if (d.#failure) throw d.#failure;
    } catch (err) {
      await d.stop();
      throw err;
    }
    try {
      await d.#startBatchApi(meterProvider);
      await d.#startDashboard();
    } catch (err) {
      await d.stop();
      throw err;
    }
    d.#startBacklogPoller(meterProvider);
    d.#ready = true;
    logger.info({ owner: d.owner, queues: config.queues.map((q) => q.queue_name) }, 'dispatcher started');
    return d;
  }

  /** True between start and stop. */
  isReady(): boolean {
    return this.#ready;
  }

  /**
   * The Batch API and its driver (`batch_api`), in the dispatching process: the driver enqueues a
   * batch's lines on the configured queue with the tenant as every gate's key, so batch traffic
   * passes the same gates as any request.
   */
  async #startBatchApi(meterProvider: MeterProvider): Promise<void> {
    const cfg = this.#config;
    const api = cfg.batch_api;
    if (api === undefined) return;
    const queue = cfg.queues.find((q) => q.queue_name === (api.queue ?? cfg.queues[0]?.queue_name));
    if (queue === undefined) throw new QError(QErrorCode.CONFIG, 'batch_api.queue is not a queue_name');
    const tenantAttributes = [...new Set([...queue.gates.map((g) => g.attribute), cfg.fairness_attribute])];
    const driver = new BatchDriver({
      store: this.store,
      queue,
      tenantAttributes,
      owner: this.owner,
      intervalMs: api.driver_interval_ms,
      leaseMs: api.driver_lease_ms,
      logger: this.#logger,
      metrics: new BatchMetrics(meterProvider),
    });
    const server = await startBatchApi({ store: this.store, config: api, queue, logger: this.#logger });
    this.#batchApi = { driver, server };
    this.batchApiPort = server.port;
    driver.start();
    this.#logger.info({ port: server.port, queue: queue.queue_name, keys: api.api_keys.length }, 'batch api listening');
  }

  /** The read-only web dashboard (`dashboard`) on the store's pool, opening on the request queues. */
  async #startDashboard(): Promise<void> {
    const cfg = this.#config.dashboard;
    if (cfg === undefined) return;
    // Loaded only when configured: a dispatcher without a dashboard does not carry its modules.
    const { createDashboard } = await import('@q/dashboard');
    const dashboard = await createDashboard({ pool: this.store.pool, schema: this.store.schema, home: 'requests' });
    const server = http.createServer((req, res) => void dashboard.handle(req, res));
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(cfg.port, cfg.host, () => resolve());
      });
    } catch (err) {
      await dashboard.close();
      throw new QError(QErrorCode.CONFIG, `dashboard: cannot listen on ${cfg.host}:${cfg.port}: ${(err as Error).message}`, { cause: err });
    }
    this.#dashboard = { dashboard, server };
    this.dashboardPort = (server.address() as AddressInfo).port;
    this.#logger.info({ port: this.dashboardPort }, 'dashboard listening');
  }

  async #startEndpoints(prometheus: PrometheusExporter | undefined): Promise<void> {
    const { health_port: hp, metrics_port: mp } = this.#config;
    const src = { isReady: () => this.#ready, check: () => this.store.ping(), prometheus };
    if (hp >= 0) {
      const e = await startEndpoint(hp, { ...src, prometheus: mp === hp ? prometheus : undefined });
      this.#endpoints.push(e);
      this.healthPort = e.port;
      if (mp === hp) this.metricsPort = e.port;
    }
    if (mp >= 0 && mp !== hp && prometheus) {
      const e = await startEndpoint(mp, { isReady: () => false, check: async () => undefined, prometheus });
      this.#endpoints.push(e);
      this.metricsPort = e.port;
    }
  }

  #startQueues(meterProvider: MeterProvider, tracerProvider: TracerProvider | undefined, onResult: DispatcherOptions['onResult']): void {
    const cfg = this.#config;
    const cancels = new CancelBatcher(this.store, cfg.cancel_check_batch_size, cfg.cancel_check_linger_ms);
    const quota: QuotaPort | undefined = this.#quota;
    const load = new KeyLoad();
    const adaptive = adaptiveOf(cfg, meterProvider);
    const hasPrometheus = cfg.prometheus_url !== undefined;
    type TierPriority = { header: string; laneObjectives: Record<string, string> };
    const pools = new Map<string, { pool: WorkerPool; gate?: Gate; metrics: DispatcherMetrics; tierPriority?: TierPriority }>();
    (cfg.pools ?? []).forEach((p, i) => {
      // Pool-gate series carry empty queue labels (docs/design/dispatcher.md#metrics).
      const metrics = new DispatcherMetrics(meterProvider, '', p.id);
      const gm = new GateMetrics(meterProvider, { queue_id: '', queue_name: '', pool_name: p.id });
      const gate = p.gate_type
        ? createGate({ gate_type: p.gate_type, gate_params: p.gate_params }, { sources: this.sources, hasPrometheus, metrics: gm }, `pools[${i}]`)
        : undefined;
      const tierPriority =
        p.merge_policy === 'tier-priority'
          ? { header: p.priority_header ?? DEFAULT_PRIORITY_HEADER, laneObjectives: { ...p.lane_objectives } }
          : undefined;
      const pool = new WorkerPool(p.id, p.workers, p.merge_policy);
      pools.set(p.id, { pool, gate, metrics, ...(tierPriority ? { tierPriority } : {}) });
      this.pools.set(p.id, pool);
    });
    for (const queue of cfg.queues) {
      const poolEntry = cfg.pools ? pools.get(queue.worker_pool_id ?? 'default') : undefined;
      const metrics = new DispatcherMetrics(meterProvider, queue.queue_name, poolEntry?.pool.id ?? 'default');
      this.metrics.set(queue.queue_name, metrics);
      const gateMetrics = new GateMetrics(meterProvider, {
        queue_id: queue.queue_name,
        queue_name: queue.queue_name,
        pool_name: poolEntry?.pool.id ?? 'default',
      });
      this.gateMetrics.set(queue.queue_name, gateMetrics);
      const queueGate = queue.gate_type
        ? createGate(
            { gate_type: queue.gate_type, gate_params: queue.gate_params },
            { sources: this.sources, hasPrometheus, metrics: gateMetrics },
            `queues[${cfg.queues.indexOf(queue)}]`,
            'queue',
          )
        : undefined;
      const deps: HandlerDeps = {
        ...(tracerProvider ? { tracer: tracerProvider.getTracer('q-dispatcher') } : {}),
        load,
        queueGate,
        pool: poolEntry?.pool,
        poolGate: poolEntry?.gate,
        ...(adaptive ? { adaptive } : {}),
        ...(poolEntry?.tierPriority ? { tierPriority: poolEntry.tierPriority } : {}),
        poolMetrics: poolEntry?.metrics,
        gateWaitTimeoutMs: cfg.gate_wait_timeout_ms,
        queue,
        config: cfg,
        client: this.#client,
        cancels,
        quota,
        metrics,
        logger: this.#logger,
        stopping: this.#stopCtl.signal,
        onResult: onResult ? (r, m) => onResult(queue.queue_name, r, m) : undefined,
      };
      const handle = createHandler(deps);
      const admission =
        queueGate || queue.gates.length > 0
          ? createAdmission(this.store, {
              queue,
              batchSize: cfg.batch_size,
              gate: queueGate,
              load,
              metrics,
              gateMetrics,
              logger: this.#logger,
              pollIntervalMs: cfg.poll_interval_ms,
            })
          : undefined;
      if (admission) this.#admissions.push(admission);
      const run = runPartitionWorker({
        store: admission?.store ?? this.store,
        ...(admission ? { pollWake: (wake: () => void) => admission.pollWake(wake) } : {}),
        queue: queue.queue_name,
        owner: this.owner,
        concurrency: cfg.concurrency,
        batchSize: cfg.batch_size,
        leaseTtlMs: secondsToMs(cfg.lease_ttl_seconds),
        drainTimeoutMs: secondsToMs(cfg.handoff_timeout_seconds),
        stopTimeoutMs: cfg.drain_timeout_ms,
        pollIntervalMs: cfg.poll_interval_ms,
        ackBatchSize: cfg.result_batch_size,
        handle,
        // A request whose handling keeps failing is answered, not run (and sent) again for ever.
        failureResult: createFailureAnswer(deps),
        signal: this.#stopCtl.signal,
        logger: this.#logger,
        meterProvider,
        tracerProvider,
      });
      this.#runs.push(
        run.catch((err: unknown) => {
          // A persistent failure (or bad options at start): stop serving rather than crash.
          const failure = new QError(QErrorCode.CONFIG, `queue ${queue.queue_name}: partition worker failed: ${(err as Error).message}`, {
            cause: err,
          });
          this.#fail(failure, 'partition worker failed; stopping', { queue: queue.queue_name, ...errInfo(err) });
          return undefined;
        }),
      );
    }
    this.#startPoolGauges(meterProvider);
  }

  /** Stops the dispatcher because of `err` (the first one is kept and settles {@link Dispatcher.failure}). */
  #fail(err: Error, message: string, fields: Record<string, unknown> = errInfo(err)): void {
    if (!this.#failure) {
      this.#failure = err;
      this.#failed(err);
    }
    this.#logger.error(fields, message);
    this.#ready = false;
    if (!this.#stopCtl.signal.aborted) queueMicrotask(() => void this.stop());
  }

  /**
   * `…_pool_worker_limit{pool_name}` once at startup, and `…_queue_depth` per queue: requests
   * waiting in their pool for a worker (the merged channel), read at every collection. Without
   * pools a dispatched request goes straight to a handler slot, so the depth is always 0 and the
   * limit of the implicit `default` pool is `concurrency` per queue.
   */
  #startPoolGauges(meterProvider: MeterProvider): void {
    const cfg = this.#config;
    const m = meterProvider.getMeter('@q/dispatcher');
    const limit = m.createGauge('llm_d_async_async_pool_worker_limit', { description: 'Workers of a pool (HTTP calls in flight at most)' });
    if (cfg.pools) for (const p of this.pools.values()) limit.record(p.workers, { pool_name: p.id });
    else limit.record(cfg.concurrency * cfg.queues.length, { pool_name: 'default' });
    const depth = m.createObservableGauge('llm_d_async_async_queue_depth', {
      description: 'Requests waiting for a pool worker (merged channel), not yet pulled',
    });
    depth.addCallback((r) => {
      for (const q of cfg.queues) {
        const poolName = cfg.pools ? (q.worker_pool_id ?? 'default') : 'default';
        r.observe(cfg.pools ? (this.pools.get(poolName)?.waitingFor(q.queue_name) ?? 0) : 0, {
          queue_id: q.queue_name,
          queue_name: q.queue_name,
          pool_name: poolName,
        });
      }
    });
  }

  /** Pending requests per queue at the last backlog poll (`…_broker_backlog`). */
  readonly backlog = new Map<string, number>();
  #backlogTimer: NodeJS.Timeout | undefined;

  /** docs/design/dispatcher.md#start-and-graceful-stop: a poller refreshes the backlog gauge of every queue every `metrics_backlog_poll_interval_ms`. */
  #startBacklogPoller(meterProvider: MeterProvider): void {
    const every = this.#config.metrics_backlog_poll_interval_ms;
    if (every <= 0) return;
    const m = meterProvider.getMeter('@q/dispatcher');
    const gauge = m.createGauge('llm_d_async_async_broker_backlog', { description: 'Pending requests per queue (backlog poller)' });
    const available = m.createGauge('llm_d_async_async_broker_backlog_source_available', {
      description: '1 when the last backlog poll succeeded',
    });
    // A snapshot histogram (docs/design/dispatcher.md#loops): cumulative `le` series of the pending requests whose deadline
    // falls within each window, re-measured every poll. A real histogram would accumulate across
    // polls; these gauges read like one (`histogram_quantile` works on them).
    const proximity = m.createGauge('llm_d_async_async_deadline_proximity_millis_bucket', {
      description: 'Pending requests whose deadline is within le ms (backlog poller)',
    });
    const poll = async () => {
      const now = Math.floor(Date.now() / 1000);
      await Promise.all(
        this.#config.queues.map(async (q) => {
          const attrs = { queue_id: q.queue_name, queue_name: q.queue_name, pool_name: q.worker_pool_id ?? 'default' };
          try {
            const { depth, expiring } = await this.store.backlog(q.queue_name, now, PROXIMITY_WINDOWS_S);
            this.backlog.set(q.queue_name, depth);
            gauge.record(depth, attrs);
            PROXIMITY_WINDOWS_S.forEach((w, i) => proximity.record(expiring[i] ?? 0, { ...attrs, le: String(w * 1000) }));
            proximity.record(depth, { ...attrs, le: '+Inf' });
            available.record(1, attrs);
          } catch (err) {
            available.record(0, attrs);
            this.#logger.debug({ queue: q.queue_name, ...errInfo(err) }, 'backlog poll failed');
          }
        }),
      );
    };
    const loop = () => {
      this.#backlogTimer = setTimeout(() => void poll().finally(() => !this.#stopCtl.signal.aborted && loop()), every);
      this.#backlogTimer.unref();
    };
    void poll().finally(loop);
  }

  /**
   * Graceful stop (docs/design/dispatcher.md#start-and-graceful-stop): not ready → stop consuming (partitions drain to peers) → wait for work
   * in flight up to `drain_timeout_ms` (then in-flight calls are aborted and put back) → close.
   * Idempotent; resolves with each queue's counters.
   */
  stop(): Promise<PartitionWorkerStats[]> {
    this.#stopping ??= (async () => {
      this.#ready = false;
      this.#stopCtl.abort();
      clearTimeout(this.#backlogTimer);
      await this.#batchApi?.server.close().catch(() => undefined);
      if (this.#dashboard) {
        const { dashboard, server } = this.#dashboard;
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await closed;
        await dashboard.close().catch(() => undefined);
      }
      await this.#batchApi?.driver.stop();
      // Requests held back by admission go back to pending while the partitions are still ours.
      await Promise.all(this.#admissions.map((a) => a.close()));
      const stats = (await Promise.all(this.#runs)).filter((x): x is PartitionWorkerStats => x !== undefined);
      await Promise.allSettled(this.#endpoints.map((e) => e.close()));
      await this.#quota?.close().catch((err: unknown) => this.#logger.warn(errInfo(err), 'quota close failed'));
      await this.#client.close().catch(() => undefined);
      await this.sources.close().catch(() => undefined);
      await this.store.close().catch((err: unknown) => this.#logger.warn(errInfo(err), 'store close failed'));
      await this.#meterOwned?.shutdown().catch(() => undefined);
      this.#logger.info({ owner: this.owner }, 'dispatcher stopped');
      return stats;
    })();
    return this.#stopping;
  }
}

/** Batch traffic's adaptive concurrency per endpoint (one set of windows for every queue), or `undefined` when off. */
function adaptiveOf(cfg: DispatcherConfig, meterProvider: MeterProvider): HandlerDeps['adaptive'] {
  const a = cfg.batch_api?.adaptive_concurrency;
  if (a === undefined || !a.enabled) return undefined;
  const limiter = new AdaptiveConcurrency(
    {
      initial: a.initial,
      min: a.min,
      max: a.max,
      latencyTargetMs: a.latency_target_ms,
      increaseStep: a.increase_step,
      decreaseFactor: a.decrease_factor,
    },
    meterProvider,
  );
  return { limiter, applies: isBatchRoute };
}
