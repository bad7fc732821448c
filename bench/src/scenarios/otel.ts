import { ROOT_CONTEXT, SpanKind, context, trace, type TracerProvider } from '@opentelemetry/api';
import type { RunContext, Scenario, System } from '../scenario.js';
import type { JobSystem } from '../systems/jobs.js';
import { startTracing, type BenchTracing } from '../tracing.js';
import { check } from '../verify.js';
import { qJobs } from '../systems/q-jobs.js';
import { qStoreRequests } from '../systems/q-requests.js';
import { drainRun } from './jobs.js';
import { dispatchAckRun } from './requests.js';

/**
 * Runs `body` with a real SDK tracer provider (or none), and proves tracing was on by counting the
 * spans exported — a traced run that exports nothing fails.
 */
async function traced<T>(
  on: boolean,
  name: string,
  body: (tracing: BenchTracing | undefined) => Promise<T>,
  minSpans = 1,
  ratio?: number,
): Promise<T> {
  const tracing = on ? startTracing(ratio === undefined ? {} : { ratio }) : undefined;
  let spans = 0;
  try {
    return await body(tracing);
  } finally {
    if (tracing) spans = await tracing.shutdown();
    if (tracing) check(spans >= minSpans, `${name}: tracing was on but ${spans} spans were exported (at least ${minSpans} expected: dropped?)`);
  }
}

function pair(run: (on: boolean, name: string) => System['run']): System[] {
  return [
    { name: 'q+otel', run: run(true, 'q+otel') },
    { name: 'q', run: run(false, 'q') },
  ];
}

/**
 * Untraced q whose handler makes, itself, the span q makes per job (same name, kind, attributes,
 * active while it runs): what one span per job costs with the SDK alone, the floor under q's own
 * tracing overhead.
 */
function spanInHandler(name: string, provider: TracerProvider): JobSystem {
  const inner = qJobs(name);
  const tracer = provider.getTracer('bench');
  return {
    ...inner,
    async open(dsn, poolSize) {
      const h = await inner.open(dsn, poolSize);
      return {
        ...h,
        startWorkers: (opts) =>
          h.startWorkers({
            ...opts,
            handle: (p) => {
              const span = tracer.startSpan(
                'q.jobs.process',
                { kind: SpanKind.CONSUMER, attributes: { 'job.type': 'noop', 'job.queue': 'bench', 'job.attempt': 1 } },
                ROOT_CONTEXT,
              );
              context.with(trace.setSpan(ROOT_CONTEXT, span), opts.handle, undefined, p);
              span.end();
            },
          }),
      };
    },
  };
}

/**
 * Job drain (concurrency 32): q traced, untraced, and untraced with one span per job made by the
 * handler (the SDK's own cost of a span per job, see {@link spanInHandler}).
 */
export function otelJobDrain(): Scenario {
  const skip = qJobs().skip as () => Promise<string | undefined>;
  const n = (ctx: RunContext) => ctx.n(10_000, 200);
  return {
    name: 'otel-job-drain',
    title: 'OpenTelemetry: job drain (10,000 jobs, concurrency 32) traced vs untraced',
    metrics: [{ key: 'rate', unit: 'jobs/s', better: 'higher' }],
    baseline: 'q+otel',
    systems: [
      // Every job's span must reach the exporter: a run that dropped spans would measure less work.
      ...pair(
        (on, name) => (ctx) => traced(on, name, (t) => drainRun(qJobs(name, t ? () => t.provider : undefined), n(ctx), 32, ctx.dsn), n(ctx)),
      ),
      // The same, with one trace in ten sampled by the SDK (ParentBased(TraceIdRatio 0.1)): each
      // job still starts a span, a non-recording one nine times in ten.
      {
        name: 'q+otel-sampled-10%',
        run: (ctx: RunContext) =>
          traced(
            true,
            'q+otel-sampled-10%',
            (t) => drainRun(qJobs('q+otel-sampled-10%', t ? () => t.provider : undefined), n(ctx), 32, ctx.dsn),
            1,
            0.1,
          ),
      },
      {
        name: 'q+span-in-handler',
        run: (ctx: RunContext) =>
          traced(
            true,
            'q+span-in-handler',
            (t) => {
              check(t !== undefined, 'q+span-in-handler: tracing is on');
              return drainRun(spanInHandler('q+span-in-handler', t.provider), n(ctx), 32, ctx.dsn);
            },
            n(ctx),
          ),
      },
    ].map((s) => ({ ...s, skip })),
  };
}

/** Request dispatch → ack (one owner, batch 256) with and without a tracer provider. */
export function otelDispatchAck(): Scenario {
  const skip = qStoreRequests().skip as () => Promise<string | undefined>;
  return {
    name: 'otel-dispatch-ack',
    title: 'OpenTelemetry: request dispatch → ack (20,000 requests, 1 runner) traced vs untraced',
    metrics: [{ key: 'rate', unit: 'req/s', better: 'higher' }],
    baseline: 'q+otel',
    systems: pair(
      (on, name) => (ctx) =>
        traced(on, name, (t) => dispatchAckRun(qStoreRequests(name, t ? () => t.provider : undefined), ctx.n(20_000, 300), 1, ctx.dsn)),
    ).map((s) => ({ ...s, skip })),
  };
}
