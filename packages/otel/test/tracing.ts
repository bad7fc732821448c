import { context, trace, type Span, type SpanOptions, type Tracer, type TracerProvider, type Context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

/** An SDK tracer provider recording into memory, with the AsyncLocalStorage context manager registered. */
export function memoryTracing(): { provider: BasicTracerProvider; exporter: InMemorySpanExporter; spans(): ReadableSpan[] } {
  if (!registeredManager) {
    registeredManager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(registeredManager);
  }
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { provider, exporter, spans: () => exporter.getFinishedSpans() };
}
let registeredManager: AsyncLocalStorageContextManager | undefined;

/** A tracer provider counting every tracer and span created through it. */
export class CountingTracerProvider implements TracerProvider {
  tracers = 0;
  spans = 0;
  constructor(private readonly inner: TracerProvider) {}
  getTracer(name: string, version?: string): Tracer {
    this.tracers++;
    const tracer = this.inner.getTracer(name, version);
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    return {
      startSpan(spanName: string, options?: SpanOptions, ctx?: Context): Span {
        self.spans++;
        return tracer.startSpan(spanName, options, ctx);
      },
      startActiveSpan(...args: unknown[]) {
        self.spans++;
        return (tracer.startActiveSpan as (...a: unknown[]) => unknown)(...args);
      },
    } as Tracer;
  }
}

/** Finished spans by name (throws when there is not exactly one). */
export function only(spans: ReadableSpan[], name: string): ReadableSpan {
  const found = spans.filter((s) => s.name === name);
  if (found.length !== 1) throw new Error(`expected one span ${name}, got ${found.length}: ${spans.map((s) => s.name).join(', ')}`);
  return found[0]!;
}

export { trace };
