/**
 * `@q/otel/sdk`: the OpenTelemetry SDK bootstrap for applications (the dispatcher, workers).
 * Libraries never import this entry; its SDK packages are optional peer dependencies.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, metrics, propagation, trace, type Attributes } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader, type IMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type Sampler, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';

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
  /** Exports everything recorded so far. */
  forceFlush(): Promise<void>;
  /**
   * Flushes and stops: exports pending spans and metrics, closes the Prometheus endpoint and
   * unregisters the globals it registered. Idempotent.
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
  const resource = resourceFromAttributes({
    ...opts.resourceAttributes,
    [ATTR_SERVICE_NAME]: opts.serviceName,
    ...(opts.serviceVersion ? { [ATTR_SERVICE_VERSION]: opts.serviceVersion } : {}),
  });
  const base = opts.otlpEndpoint ? opts.otlpEndpoint.replace(/\/+$/, '') : undefined;

  const spanProcessors: SpanProcessor[] = [...(opts.spanProcessors ?? [])];
  if (base) {
    spanProcessors.push(new BatchSpanProcessor(new OTLPTraceExporter({ url: `${base}/v1/traces`, headers: opts.otlpHeaders })));
  }
  const tracerProvider = new BasicTracerProvider({
    resource,
    spanProcessors,
    ...(opts.sampler ? { sampler: opts.sampler } : {}),
  });

  const readers: IMetricReader[] = [...(opts.metricReaders ?? [])];
  if (base) {
    readers.push(new PeriodicExportingMetricReader({
      exporter: new OTLPMetricExporter({ url: `${base}/v1/metrics`, headers: opts.otlpHeaders }),
      exportIntervalMillis: opts.metricExportIntervalMs ?? 60_000,
    }));
  }
  let prometheus: PrometheusEndpoint | undefined;
  if (opts.prometheusPort !== undefined) {
    prometheus = new PrometheusEndpoint(opts.prometheusPort, opts.prometheusHost);
    readers.push(prometheus.reader);
  }
  const meterProvider = new MeterProvider({ resource, readers });

  // Each global is set only if nothing else holds it (the API refuses to overwrite), and only
  // what we set is unregistered on shutdown.
  const registered = { context: false, propagation: false, trace: false, metrics: false };
  if (opts.registerGlobals ?? true) {
    const manager = new AsyncLocalStorageContextManager().enable();
    registered.context = context.setGlobalContextManager(manager);
    if (!registered.context) manager.disable();
    registered.propagation = propagation.setGlobalPropagator(new CompositePropagator({
      propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
    }));
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
        const results = await Promise.allSettled([
          tracerProvider.shutdown(),
          meterProvider.shutdown(),
          prometheus?.close(),
        ]);
        if (registered.trace) trace.disable();
        if (registered.metrics) metrics.disable();
        if (registered.propagation) propagation.disable();
        if (registered.context) context.disable();
        const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed) throw failed.reason;
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
  readonly reader = new PrometheusExporter({ preventServerStart: true });
  port: number | undefined;
  private readonly server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/metrics') this.reader.getMetricsRequestHandler(req, res);
    else {
      res.statusCode = 404;
      res.end();
    }
  });

  constructor(
    private readonly wantedPort: number,
    private readonly host?: string,
  ) {
    if (!Number.isInteger(wantedPort) || wantedPort < 0 || wantedPort > 65535) {
      throw new RangeError(`startTelemetry: prometheusPort must be an integer 0..65535, got ${wantedPort}`);
    }
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      this.server.once('error', onError);
      this.server.listen(this.wantedPort, this.host, () => {
        this.server.off('error', onError);
        this.port = (this.server.address() as AddressInfo).port;
        resolve();
      });
    });
  }

  close(): Promise<void> {
    if (!this.server.listening) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.server.close((err) => (err ? reject(err) : resolve()));
      this.server.closeAllConnections();
    });
  }
}
