// Gauges of the metric gates (docs/design/dispatcher.md#metrics): the metric value read, the threshold it is compared with,
// and whether the source answered; labels queue_id, queue_name, pool_name, inference_pool.
import { metrics, type Attributes, type Gauge, type MeterProvider } from '@opentelemetry/api';

/** The gate gauges of one queue or pool. */
export class GateMetrics {
  readonly #value: Gauge;
  readonly #threshold: Gauge;
  readonly #available: Gauge;
  readonly #budget: Gauge;
  readonly #attrs: Attributes;
  /** Last published values per inference pool (tests and the demo read them). */
  readonly last = new Map<string, { value?: number; available: boolean; threshold?: number }>();

  constructor(meterProvider: MeterProvider | undefined, attrs: { queue_id: string; queue_name: string; pool_name: string }) {
    const m = (meterProvider ?? metrics.getMeterProvider()).getMeter('@q/dispatcher');
    this.#attrs = attrs;
    this.#value = m.createGauge('llm_d_async_async_gate_metric_value', { description: 'Metric value read by a metric gate' });
    this.#threshold = m.createGauge('llm_d_async_async_gate_metric_threshold', { description: 'Threshold of a metric gate' });
    this.#available = m.createGauge('llm_d_async_async_gate_metric_source_available', {
      description: '1 when the metric source of a gate answered',
    });
    this.#budget = m.createGauge('llm_d_async_async_dispatch_budget', { description: 'Dispatch budget of the last poll' });
  }

  value(pool: string, v: number | undefined, available: boolean): void {
    const a = { ...this.#attrs, inference_pool: pool };
    if (v !== undefined) this.#value.record(v, a);
    this.#available.record(available ? 1 : 0, a);
    const e = this.last.get(pool) ?? { available };
    e.available = available;
    if (v !== undefined) e.value = v;
    this.last.set(pool, e);
  }

  threshold(pool: string, t: number): void {
    this.#threshold.record(t, { ...this.#attrs, inference_pool: pool });
    const e = this.last.get(pool) ?? { available: false };
    e.threshold = t;
    this.last.set(pool, e);
  }

  budget(b: number): void {
    this.#budget.record(b, this.#attrs);
  }
}
