// Minimal recording tracer and meter providers for asserting span names and counter adds.
// They implement just what @q/otel calls; no SDK is needed.
import {
  INVALID_SPAN_CONTEXT,
  context,
  trace,
  type Context,
  type MeterProvider,
  type Span,
  type SpanOptions,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';

export class RecordingTracerProvider implements TracerProvider {
  readonly spans: Array<{ name: string; attributes: SpanOptions['attributes'] }> = [];

  getTracer(): Tracer {
    const spans = this.spans;
    const start = (name: string, options?: SpanOptions): Span => {
      spans.push({ name, attributes: options?.attributes });
      return trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
    };
    return {
      startSpan: start,
      startActiveSpan: ((name: string, ...rest: unknown[]) => {
        const fn = rest[rest.length - 1] as (s: Span) => unknown;
        const span = start(name, typeof rest[0] === 'object' ? (rest[0] as SpanOptions) : undefined);
        return context.with(trace.setSpan(context.active() as Context, span), () => fn(span));
      }) as Tracer['startActiveSpan'],
    };
  }
}

export class RecordingMeterProvider {
  readonly adds: Array<{ name: string; value: number; attributes: Record<string, unknown> | undefined }> = [];

  total(name: string): number {
    return this.adds.filter((a) => a.name === name).reduce((s, a) => s + a.value, 0);
  }

  asProvider(): MeterProvider {
    const adds = this.adds;
    const counter = (name: string) => ({ add: (value: number, attributes?: Record<string, unknown>) => adds.push({ name, value, attributes }) });
    const meter = {
      createCounter: counter,
      createUpDownCounter: counter,
      createHistogram: (name: string) => ({ record: () => undefined, name }),
      createGauge: (name: string) => ({ record: () => undefined, name }),
      createObservableGauge: () => ({ addCallback: () => undefined, removeCallback: () => undefined }),
      createObservableCounter: () => ({ addCallback: () => undefined, removeCallback: () => undefined }),
      createObservableUpDownCounter: () => ({ addCallback: () => undefined, removeCallback: () => undefined }),
      addBatchObservableCallback: () => undefined,
      removeBatchObservableCallback: () => undefined,
    };
    return { getMeter: () => meter } as unknown as MeterProvider;
  }
}
