/**
 * `@q/otel/sdk`: the OpenTelemetry SDK bootstrap for applications (the dispatcher, workers).
 * Libraries never import this entry; its SDK packages are optional peer dependencies.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, metrics, propagation, trace, type Attributes } from '@opentelemetry/api';
import type { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import type { MeterProvider, IMetricReader } from '@opentelemetry/sdk-metrics';
import type { BasicTracerProvider, Sampler, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { QError, QErrorCode, redactDsn } from '@q/schema';
import { errorFields, type Logger } from './logger.js';
import { loadSdk } from './sdk-peers.js';

export { SDK_INSTALL_COMMAND } from './sdk-peers.js';

/** Default per-export timeout of the OTLP exporters (the SDK's own default). */
const DEFAULT_EXPORT_TIMEOUT_MS = 10_000;

/** Where startTelemetry reports what it cannot throw (failed exports at shutdown): stderr. */
const stderrLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: (fields, msg) => process.stderr.write(`q telemetry: ${msg ?? ''} ${JSON.stringify(fields)}\n`),
  error: (fields, msg) => process.stderr.write(`q telemetry: ${msg ?? ''} ${JSON.stringify(fields)}\n`),
};

/** Options of {@link startTelemetry}. */
export interface TelemetryOptions {
  /** `service.name` of the resource. */
  serviceName: string;
  /** `service.version` of the resource. */
  serviceVersion?: string;
  /** More resource attributes (e.g. `deployment.environment.name`). */
  resourceAttributes?: Attributes;
  /**
   * Base URL of an OTLP/HTTP collector (`http://collector:4318`): traces go to `/v1/traces`,
   * metrics to `/v1/metrics`. Absent: no OTLP export.
   */
  otlpEndpoint?: string;
  /** Headers sent with every OTLP request (authentication). */
  otlpHeaders?: Record<string, string>;
  /** Metric export interval to OTLP, ms. Default 60 000. */
  metricExportIntervalMs?: number;
  /**
   * Serve Prometheus text format at `http://<prometheusHost>:<port>/metrics`. `0` picks a free
   * port (read it from {@link Telemetry.prometheusPort} once {@link Telemetry.ready} resolves).
   * Absent: no endpoint.
   */
  prometheusPort?: number;
  /** Interface the Prometheus endpoint listens on. Default: all interfaces. */
  prometheusHost?: string;
  /** Sampler of the tracer provider. Default: parent-based, always on. */
  sampler?: Sampler;
  /** Extra span processors (e.g. a `SimpleSpanProcessor` over an in-memory exporter in tests). */
  spanProcessors?: SpanProcessor[];
  /** Extra metric readers. */
  metricReaders?: IMetricReader[];
  /**
   * Register the providers, the AsyncLocalStorage context manager and the W3C trace-context +
   * baggage propagator as the process-wide globals of `@opentelemetry/api`. Default `true`.
   * Without a context manager, spans do not nest across `await`.
   */
  registerGlobals?: boolean;
  /**
   * Timeout of one OTLP export, retries included, ms. Default 10 000. It also bounds
   * {@link Telemetry.shutdown}: an unreachable collector delays shutdown by at most about this.
   */
  exportTimeoutMs?: number;
  /**
   * Receives what cannot be thrown: exports that failed during {@link Telemetry.shutdown}. A pino
   * logger fits. Default: one line on stderr.
   */
  logger?: Logger;
}

/** What {@link startTelemetry} started. */
export interface Telemetry {
  /** Pass to every q `open()` as `tracerProvider`. */
  readonly tracerProvider: BasicTracerProvider;
  /** Pass to q's metric helpers (`requestMetrics(meterProvider)` …). */
  readonly meterProvider: MeterProvider;
  /** Resolves once the Prometheus endpoint listens (at once without one); rejects if it cannot bind. */
  readonly ready: Promise<void>;
  /** The bound Prometheus port once {@link Telemetry.ready} resolved, else `undefined`. */
  readonly prometheusPort: number | undefined;
  /** Exports everything recorded so far; rejects when an export fails. */
  forceFlush(): Promise<void>;
  /**
   * Flushes and stops: exports pending spans and metrics, closes the Prometheus endpoint and
   * unregisters the globals it registered. Idempotent. Never rejects: an export that fails (an
   * unreachable collector) is logged to {@link TelemetryOptions.logger} and its data dropped, so
   * a process can always shut down cleanly.
   */
  shutdown(): Promise<void>;
}

/**
 * Starts OpenTelemetry for an application: a tracer provider (batching OTLP/HTTP trace export
 * when `otlpEndpoint` is given), a meter provider (periodic OTLP/HTTP metric export, and/or a
 * Prometheus `/metrics` endpoint when `prometheusPort` is given), the AsyncLocalStorage context
 * manager and W3C trace-context propagation.
 *
 * Synchronous, so `startTelemetry(...)` and `await startTelemetry(...)` both work; await
 * {@link Telemetry.ready} to know the Prometheus endpoint is listening.
 */
export function startTelemetry(opts: TelemetryOptions): Telemetry {
  if (!opts || typeof opts.serviceName !== 'string' || opts.serviceName === '') {
    throw new TypeError('startTelemetry: serviceName is required');
  }
  const exportTimeoutMs = opts.exportTimeoutMs ?? DEFAULT_EXPORT_TIMEOUT_MS;
  if (!Number.isInteger(exportTimeoutMs) || exportTimeoutMs <= 0) {
    throw new QError(QErrorCode.INVALID_ARGUMENT, `startTelemetry: exportTimeoutMs must be a positive integer, got ${exportTimeoutMs}`);
  }
  const log = opts.logger ?? stderrLogger;
  const sdk = loadSdk();
  const { resourceFromAttributes } = sdk.resources;
  const { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } = sdk.semanticConventions;
  const { BasicTracerProvider, BatchSpanProcessor } = sdk.sdkTraceBase;
  const { MeterProvider, PeriodicExportingMetricReader } = sdk.sdkMetrics;
  const { OTLPTraceExporter } = sdk.exporterTraceOtlpHttp;
  const { OTLPMetricExporter } = sdk.exporterMetricsOtlpHttp;
  const resource = resourceFromAttributes({
    ...opts.resourceAttributes,
    [ATTR_SERVICE_NAME]: opts.serviceName,
    ...(opts.serviceVersion ? { [ATTR_SERVICE_VERSION]: opts.serviceVersion } : {}),
  });
  const base = opts.otlpEndpoint ? opts.otlpEndpoint.replace(/\/+$/, '') : undefined;
  const endpointForLogs = base === undefined ? undefined : redactDsn(base);

  // The SDK reports a failed export only to its diag channel (silent by default), and a failed
  // metric export not even to shutdown(): each export result is checked here and logged.
  const loggedErrors = new Set<unknown>();
  type Done = (result: { code: number; error?: Error }) => void;
  const logFailures = <T extends { export(items: never, done: Done): void }>(exporter: T, what: string): T => {
    const send = exporter.export.bind(exporter) as unknown as (items: unknown, done: Done) => void;
    (exporter as unknown as { export: (items: unknown, done: Done) => void }).export = (items, done) => {
      send(items, (result) => {
        if (result.code !== sdk.core.ExportResultCode.SUCCESS) {
          if (result.error !== undefined) loggedErrors.add(result.error);
          log.warn(
            { ...errorFields(result.error ?? 'export failed'), what, otlpEndpoint: endpointForLogs },
            'telemetry export failed; the data was dropped',
          );
        }
        done(result);
      });
    };
    return exporter;
  };

  const spanProcessors: SpanProcessor[] = [...(opts.spanProcessors ?? [])];
  if (base) {
    spanProcessors.push(
      new BatchSpanProcessor(
        logFailures(new OTLPTraceExporter({ url: `${base}/v1/traces`, headers: opts.otlpHeaders, timeoutMillis: exportTimeoutMs }), 'traces'),
        { exportTimeoutMillis: exportTimeoutMs },
      ),
    );
  }
  const tracerProvider = new BasicTracerProvider({
    resource,
    spanProcessors,
    ...(opts.sampler ? { sampler: opts.sampler } : {}),
  });

  const readers: IMetricReader[] = [...(opts.metricReaders ?? [])];
  if (base) {
    readers.push(
      new PeriodicExportingMetricReader({
        exporter: logFailures(
          new OTLPMetricExporter({ url: `${base}/v1/metrics`, headers: opts.otlpHeaders, timeoutMillis: exportTimeoutMs }),
          'metrics',
        ),
        exportIntervalMillis: opts.metricExportIntervalMs ?? 60_000,
        // The reader's timeout must not exceed its interval (the SDK refuses that).
        exportTimeoutMillis: Math.min(exportTimeoutMs, opts.metricExportIntervalMs ?? 60_000),
      }),
    );
  }
  let prometheus: PrometheusEndpoint | undefined;
  if (opts.prometheusPort !== undefined) {
    prometheus = new PrometheusEndpoint(
      new sdk.exporterPrometheus.PrometheusExporter({ preventServerStart: true }),
      opts.prometheusPort,
      opts.prometheusHost,
    );
    readers.push(prometheus.reader);
  }
  const meterProvider = new MeterProvider({ resource, readers });

  // Each global is set only if nothing else holds it (the API refuses to overwrite), and only
  // what we set is unregistered on shutdown.
  const registered = { context: false, propagation: false, trace: false, metrics: false };
  if (opts.registerGlobals ?? true) {
    const manager = new sdk.contextAsyncHooks.AsyncLocalStorageContextManager().enable();
    registered.context = context.setGlobalContextManager(manager);
    if (!registered.context) manager.disable();
    registered.propagation = propagation.setGlobalPropagator(
      new sdk.core.CompositePropagator({
        propagators: [new sdk.core.W3CTraceContextPropagator(), new sdk.core.W3CBaggagePropagator()],
      }),
    );
    registered.trace = trace.setGlobalTracerProvider(tracerProvider);
    registered.metrics = metrics.setGlobalMeterProvider(meterProvider);
  }

  const ready = prometheus ? prometheus.listen() : Promise.resolve();
  ready.catch(() => undefined); // reported through `ready`; never an unhandled rejection

  let stopping: Promise<void> | undefined;
  return {
    tracerProvider,
    meterProvider,
    ready,
    get prometheusPort() {
      return prometheus?.port;
    },
    async forceFlush() {
      await Promise.all([tracerProvider.forceFlush(), meterProvider.forceFlush()]);
    },
    shutdown() {
      stopping ??= (async () => {
        const steps = [
          ['traces', tracerProvider.shutdown()],
          ['metrics', meterProvider.shutdown()],
          ['prometheus endpoint', prometheus?.close()],
        ] as const;
        // The exporters time out on their own (exportTimeoutMs); this bounds an exporter that
        // would not, so shutdown always ends.
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<'timeout'>((resolve) => {
          timer = setTimeout(() => resolve('timeout'), exportTimeoutMs + 2_000);
          timer.unref();
        });
        const settled = await Promise.race([Promise.allSettled(steps.map(([, p]) => p)), deadline]);
        clearTimeout(timer);
        if (registered.trace) trace.disable();
        if (registered.metrics) metrics.disable();
        if (registered.propagation) propagation.disable();
        if (registered.context) context.disable();
        if (settled === 'timeout') {
          log.warn({ timeoutMs: exportTimeoutMs + 2_000 }, 'telemetry shutdown timed out; unexported spans and metrics were dropped');
          return;
        }
        settled.forEach((r, i) => {
          // An export failure was logged as it happened; anything else is logged here.
          if (r.status === 'rejected' && !loggedErrors.has(r.reason)) {
            log.warn({ ...errorFields(r.reason), what: steps[i]?.[0], otlpEndpoint: endpointForLogs }, 'telemetry shutdown failed');
          }
        });
      })();
      return stopping;
    },
  };
}

/**
 * A Prometheus endpoint on our own HTTP server (the exporter's built-in one cannot report the
 * port it bound, nor a bind failure, to the caller).
 */
class PrometheusEndpoint {
  port: number | undefined;
  readonly #server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/metrics') this.reader.getMetricsRequestHandler(req, res);
    else {
      res.statusCode = 404;
      res.end();
    }
  });

  readonly #wantedPort: number;
  readonly #host: string | undefined;

  constructor(
    readonly reader: PrometheusExporter,
    wantedPort: number,
    host?: string,
  ) {
    this.#wantedPort = wantedPort;
    this.#host = host;
    if (!Number.isInteger(wantedPort) || wantedPort < 0 || wantedPort > 65535) {
      throw new RangeError(`startTelemetry: prometheusPort must be an integer 0..65535, got ${wantedPort}`);
    }
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      this.#server.once('error', onError);
      this.#server.listen(this.#wantedPort, this.#host, () => {
        this.#server.off('error', onError);
        this.port = (this.#server.address() as AddressInfo).port;
        resolve();
      });
    });
  }

  close(): Promise<void> {
    if (!this.#server.listening) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.#server.close((err) => (err ? reject(err) : resolve()));
      this.#server.closeAllConnections();
    });
  }
}
