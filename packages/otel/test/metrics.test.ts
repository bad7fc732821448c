import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type Histogram,
} from '@opentelemetry/sdk-metrics';
import { describe, expect, it } from 'vitest';
import { DEPRECATED_METRIC, JOB_DURATION_BUCKETS_S, METRIC, jobMetrics, quotaKeyClass } from '../src/index.js';

describe('quotaKeyClass', () => {
  it.each([
    ['tenant:42', 'tenant'],
    ['model.gpt-4:user:9', 'model.gpt-4'],
    ['no-class', 'other'],
    [':leading', 'other'],
    ['has space:1', 'other'],
    [`${'x'.repeat(33)}:1`, 'other'],
    ['ünicode:1', 'other'],
  ])('%j → %j', (key, cls) => expect(quotaKeyClass(key)).toBe(cls));
});

describe('jobMetrics', () => {
  it('records completions and durations in seconds with the job-duration buckets', async () => {
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
    const provider = new MeterProvider({ readers: [reader] });
    const m = jobMetrics(provider);
    const attrs = { 'job.type': 'email', 'job.status': 'succeeded' };
    m.completed.add(1, attrs);
    m.completed.add(1, attrs);
    m.duration.record(0.3, attrs);
    m.duration.record(45, attrs);
    await reader.forceFlush();
    const all = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
    const completed = all.find((x) => x.descriptor.name === METRIC.jobsCompleted)!;
    expect(completed.descriptor.unit).toBe('{job}');
    expect(completed.dataPoints).toEqual([expect.objectContaining({ value: 2, attributes: attrs })]);
    const duration = all.find((x) => x.descriptor.name === METRIC.jobsDuration)!;
    expect(duration.descriptor.unit).toBe('s');
    expect(duration.dataPointType).toBe(DataPointType.HISTOGRAM);
    const point = duration.dataPoints[0]!.value as Histogram;
    expect(point.buckets.boundaries).toEqual([...JOB_DURATION_BUCKETS_S]);
    expect(point.count).toBe(2);
    expect(point.sum).toBeCloseTo(45.3);
    // The former name carries the same data for one release.
    const legacy = all.find((x) => x.descriptor.name === DEPRECATED_METRIC.jobsDuration)!;
    expect(legacy.descriptor.unit).toBe('s');
    expect((legacy.dataPoints[0]!.value as Histogram).sum).toBeCloseTo(45.3);
    expect(legacy.dataPoints[0]!.attributes).toEqual(attrs);
    await provider.shutdown();
  });

  it('names every instrument with a unit other than a count after that unit', () => {
    expect(METRIC.jobsDuration).toBe('q.jobs.duration.seconds');
    // Units of counts ({job}, {request}, …) carry no suffix; Prometheus adds `_total` to counters.
    for (const name of Object.values(METRIC)) expect(name).toMatch(/^q\.[a-z_]+\.[a-z_]+(\.seconds)?$/);
  });

  it('deprecatedNames: false records only the current names', async () => {
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
    const provider = new MeterProvider({ readers: [reader] });
    jobMetrics(provider, { deprecatedNames: false }).duration.record(1, { 'job.type': 'x', 'job.status': 'succeeded' });
    await reader.forceFlush();
    const names = exporter
      .getMetrics()
      .flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics))
      .map((x) => x.descriptor.name);
    expect(names).toEqual([METRIC.jobsDuration]);
    await provider.shutdown();
  });
});
