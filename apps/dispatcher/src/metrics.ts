// Dispatcher metrics (docs/design/dispatcher.md#metrics, prefix `llm_d_async_`) on an OpenTelemetry meter, plus
// in-process tallies the demo summary and `status` read.
import { metrics, type Attributes, type Counter, type Histogram, type MeterProvider, type UpDownCounter } from '@opentelemetry/api';
import type { ErrorCode } from './formats.js';

const LATENCY_BUCKETS = [10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000];
const RESIDENCE_BUCKETS = [
  500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 300000, 600000, 1800000, 3600000, 7200000, 21600000, 43200000, 86400000,
];

const RESERVOIR = 50_000;

/** Gate decision reasons (docs/design/dispatcher.md#metrics). */
export type GateReason = 'gate_closed' | 'quota_exhausted' | 'dropped' | 'error';

/** In-process tallies since start. */
export interface Tallies {
  /** Requests seen for the first time (retry_count 0). */
  requests: number;
  /** Results by outcome: `ok` (status < 400), `http_<status>` (error status), or an error code. */
  results: Map<string, number>;
  retries: number;
  shed: number;
  /** HTTP attempt latencies, ms (a uniform sample of at most 50 000). */
  attemptLatencies: number[];
  gateDecisions: Map<GateReason, number>;
  inflight: number;
}

/** One queue's instruments. */
export class DispatcherMetrics {
  readonly tallies: Tallies = {
    requests: 0,
    results: new Map(),
    retries: 0,
    shed: 0,
    attemptLatencies: [],
    gateDecisions: new Map(),
    inflight: 0,
  };

  readonly #requestTotal: Counter;
  readonly #retriesTotal: Counter;
  readonly #successful: Counter;
  readonly #failed: Counter;
  readonly #exceeded: Counter;
  readonly #shedded: Counter;
  readonly #gate: Counter;
  readonly #latency: Histogram;
  readonly #residence: Histogram;
  readonly #inflightGauge: UpDownCounter;
  readonly #attrs: Attributes;
  #seen = 0;

  constructor(meterProvider: MeterProvider | undefined, queue: string, pool = 'default') {
    const m = (meterProvider ?? metrics.getMeterProvider()).getMeter('@q/dispatcher');
    this.#attrs = { queue_id: queue, queue_name: queue, pool_name: pool };
    const c = (name: string, description: string) => m.createCounter(`llm_d_async_${name}`, { description });
    this.#requestTotal = c('async_request_total', 'Requests pulled for the first time');
    this.#retriesTotal = c('async_request_retries_total', 'Retries scheduled');
    this.#successful = c('async_successful_requests_total', 'HTTP calls answered < 400');
    this.#failed = c('async_failed_requests_total', 'Fatal failures');
    this.#exceeded = c('async_exceeded_deadline_requests_total', 'Requests that hit their deadline');
    this.#shedded = c('async_shedded_requests_total', '429 answers');
    this.#gate = c('async_gate_decisions_total', 'Gate refusals, drops and errors');
    this.#latency = m.createHistogram('llm_d_async_async_inference_latency_time_millis', {
      description: 'HTTP attempt latency',
      unit: 'ms',
      advice: { explicitBucketBoundaries: LATENCY_BUCKETS },
    });
    this.#residence = m.createHistogram('llm_d_async_async_queue_residence_time_millis', {
      description: 'Enqueue to worker pull',
      unit: 'ms',
      advice: { explicitBucketBoundaries: RESIDENCE_BUCKETS },
    });
    this.#inflightGauge = m.createUpDownCounter('llm_d_async_async_inflight_requests', { description: 'HTTP calls in flight' });
    for (const reason of ['gate_closed', 'quota_exhausted', 'dropped', 'error'] as const) this.#gate.add(0, { ...this.#attrs, reason });
  }

  pulled(retryCount: number, residenceMs: number | undefined): void {
    if (retryCount === 0) {
      this.tallies.requests++;
      this.#requestTotal.add(1, this.#attrs);
    }
    if (residenceMs !== undefined && residenceMs >= 0) this.#residence.record(residenceMs, this.#attrs);
  }

  attempt(latencyMs: number): void {
    // A bounded reservoir: a long-running service must not grow without end.
    const l = this.tallies.attemptLatencies;
    this.#seen++;
    if (l.length < RESERVOIR) l.push(latencyMs);
    else {
      const i = Math.floor(Math.random() * this.#seen);
      if (i < RESERVOIR) l[i] = latencyMs;
    }
    this.#latency.record(latencyMs, this.#attrs);
  }

  inflight(delta: 1 | -1): void {
    this.tallies.inflight += delta;
    this.#inflightGauge.add(delta, this.#attrs);
  }

  retry(shed: boolean): void {
    this.tallies.retries++;
    this.#retriesTotal.add(1, this.#attrs);
    if (shed) this.shedOnly();
  }

  /** A 429 that is not retried (deadline reached). */
  shedOnly(): void {
    this.tallies.shed++;
    this.#shedded.add(1, this.#attrs);
  }

  /** A request ended by its deadline whose result is its last HTTP response (no error code). */
  exceededOnly(): void {
    this.#exceeded.add(1, this.#attrs);
  }

  gateDecision(reason: GateReason): void {
    this.tallies.gateDecisions.set(reason, (this.tallies.gateDecisions.get(reason) ?? 0) + 1);
    this.#gate.add(1, { ...this.#attrs, reason });
  }

  /** A final result: HTTP status (no code) or an error code. */
  result(status: number | undefined, code: ErrorCode | undefined): void {
    const key = code ?? (status !== undefined && status < 400 ? 'ok' : `http_${status ?? 0}`);
    this.tallies.results.set(key, (this.tallies.results.get(key) ?? 0) + 1);
    // Deadline ends are counted by `exceededOnly` (also when the last response is the result).
    if (code === 'DEADLINE_EXCEEDED' || code === 'CANCELLED') return;
    if (code !== undefined || (status !== undefined && status >= 400)) this.#failed.add(1, this.#attrs);
    else this.#successful.add(1, this.#attrs);
  }
}
