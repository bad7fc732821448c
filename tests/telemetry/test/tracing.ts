import { waitFor as poll } from '@q/testing';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

let manager: AsyncLocalStorageContextManager | undefined;

/** In-memory tracing and metrics, as an app would wire them (AsyncLocalStorage context manager). */
export function memoryTelemetry() {
  if (!manager) {
    manager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(manager);
  }
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] });
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    tracerProvider,
    meterProvider,
    spans: (): ReadableSpan[] => spanExporter.getFinishedSpans(),
    resetSpans: () => spanExporter.reset(),
    /** Collects now and returns the latest value of every metric by name. */
    async metrics(): Promise<Map<string, MetricData>> {
      metricExporter.reset();
      await reader.forceFlush();
      const out = new Map<string, MetricData>();
      for (const rm of metricExporter.getMetrics()) {
        for (const sm of rm.scopeMetrics) for (const m of sm.metrics) out.set(m.descriptor.name, m);
      }
      return out;
    },
    async shutdown() {
      await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}

/** Everything a span exports, as text (to look for leaked values). */
export function exported(s: ReadableSpan): string {
  return JSON.stringify({ name: s.name, attributes: s.attributes, events: s.events, status: s.status, links: s.links });
}

/** Polls `check` until it returns a value other than undefined/false. */
export async function waitFor<T>(check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  return (await poll(check, { timeoutMs, done: (v) => v !== undefined && v !== false })) as T;
}
