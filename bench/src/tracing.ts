import { context, type TracerProvider } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';

/** Counts exported spans and drops them: export cost without a collector in the measurement. */
class CountingExporter implements SpanExporter {
  spans = 0;
  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    this.spans += spans.length;
    done({ code: ExportResultCode.SUCCESS });
  }
  async shutdown(): Promise<void> {}
  async forceFlush(): Promise<void> {}
}

/** A real SDK tracer provider as an app would register it (always-on sampling, batch processor with its defaults). */
export interface BenchTracing {
  readonly provider: TracerProvider;
  /** Flushes and shuts down; returns how many spans were exported. */
  shutdown(): Promise<number>;
}

/** Starts tracing with an async-context manager, as `@q/otel/sdk` or any Node SDK would (`ratio`: sampled traces). */
export function startTracing(opts: { ratio?: number } = {}): BenchTracing {
  const manager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(manager);
  const exporter = new CountingExporter();
  const provider = new BasicTracerProvider({
    // Always on by default; with `ratio`, the SDK's ratio sampler for traces that start here, as
    // production tracing is usually configured.
    ...(opts.ratio !== undefined ? { sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(opts.ratio) }) } : {}),
    // The SDK's defaults (queue 2,048, export batches of 512), as NodeSDK registers them: a larger
    // queue keeps spans alive longer and measured the garbage collector more than the spans. The
    // scenarios check that no span was dropped.
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  return {
    provider,
    async shutdown() {
      await provider.forceFlush();
      await provider.shutdown();
      context.disable();
      return exporter.spans;
    },
  };
}
