import { metrics, type Attributes, type Counter, type Histogram, type Meter, type MeterProvider, type ObservableGauge } from '@opentelemetry/api';
import { INSTRUMENTATION_SCOPE } from './pool.js';

/**
 * Stable metric names. Documented in docs/telemetry.md; renaming one is a breaking change.
 * A name with a unit other than a count ends in that unit (`….seconds`), because the Prometheus
 * exporter appends none itself: `q.jobs.duration.seconds` is `q_jobs_duration_seconds` there.
 */
export const METRIC = {
  jobsCompleted: 'q.jobs.completed',
  jobsDuration: 'q.jobs.duration.seconds',
  jobsClaimed: 'q.jobs.claimed',
  jobsLeaseLost: 'q.jobs.lease_lost',
  /** Database failures of a worker's loops, by `error.kind` (persistent | transient) and `db.sqlstate`. */
  jobsWorkerFailures: 'q.jobs.worker_failures',
  /** Worker rounds that found no work (an empty claim, a maintenance round with nothing to do), by `q.operation`: counted, not traced. */
  jobsIdleRounds: 'q.jobs.idle_rounds',
  /** Jobs a claim leased under a per-group limit, by the limit (`q.limit.queue`, `q.limit.type`: `*` for any). */
  jobsGroupGrants: 'q.jobs.group_grants',
  /** Groups a claim found at a limit (their next job left queued), by the limit and `q.limit.kind` (concurrency | rate). */
  jobsGroupRefusals: 'q.jobs.group_refusals',
  /** How long a job leased under a per-group limit waited, from its `runAt` to the claim, by the limit. */
  jobsGroupWait: 'q.jobs.group_wait.seconds',
  /** Flows inserted (`JobQueue.flow` that created one; a flow found by its idempotency key is not counted again). */
  flowsStarted: 'q.flows.started',
  /** How long a flow node waited from its release (its last parent done) to its claim, by `job.type`. */
  flowsReleaseLatency: 'q.flows.release_latency.seconds',
  requestsEnqueued: 'q.requests.enqueued',
  requestsDispatched: 'q.requests.dispatched',
  requestsAcked: 'q.requests.acked',
  requestsFenced: 'q.requests.fenced',
  requestsRetried: 'q.requests.retried',
  requestsBacklog: 'q.requests.backlog',
  partitionsOwned: 'q.partitions.owned',
  quotaGrants: 'q.quota.grants',
  quotaRefusals: 'q.quota.refusals',
  resultsPopped: 'q.results.popped',
  resultsExpired: 'q.results.expired',
} as const;

/** The meter q records with: the given provider's, else the global one (a no-op until an app registers an SDK). */
export function qMeter(meterProvider?: MeterProvider): Meter {
  return (meterProvider ?? metrics.getMeterProvider()).getMeter(INSTRUMENTATION_SCOPE);
}

/**
 * Former names, still recorded next to their {@link METRIC} successor (same values and
 * attributes) so dashboards keep working through one release; removed in the next minor release.
 * Turn them off early with `jobMetrics(mp, { deprecatedNames: false })`.
 *
 * @deprecated Query the {@link METRIC} names.
 */
export const DEPRECATED_METRIC = {
  /** Now {@link METRIC.jobsDuration} (`q.jobs.duration.seconds`): Prometheus `q_jobs_duration` had no unit. */
  jobsDuration: 'q.jobs.duration',
} as const;

/** Instruments of the request queue (`@q/store`, `@q/partition-consumer`). */
export interface RequestMetrics {
  enqueued: Counter;
  dispatched: Counter;
  acked: Counter;
  fenced: Counter;
  retried: Counter;
  resultsPopped: Counter;
  resultsExpired: Counter;
}

/** One counter: its {@link METRIC} name, its unit (`{request}`), its description. */
type CounterSpec = readonly [name: string, unit: string, description: string];

/** Creates one counter per entry of `specs` on `m`, under the same keys. */
function counters<K extends string>(m: Meter, specs: Record<K, CounterSpec>): Record<K, Counter> {
  const out = {} as Record<K, Counter>;
  for (const key of Object.keys(specs) as K[]) {
    const [name, unit, description] = specs[key];
    out[key] = m.createCounter(name, { unit, description });
  }
  return out;
}

/** Creates the request-queue instruments. Attributes: `queue` where known. */
export function requestMetrics(meterProvider?: MeterProvider): RequestMetrics {
  return counters(qMeter(meterProvider), {
    enqueued: [METRIC.requestsEnqueued, '{request}', 'Requests enqueued'],
    dispatched: [METRIC.requestsDispatched, '{request}', 'Requests handed to a dispatcher'],
    acked: [METRIC.requestsAcked, '{request}', 'Acks accepted (result written)'],
    fenced: [METRIC.requestsFenced, '{request}', 'Writes refused because the writer no longer owned the request'],
    retried: [METRIC.requestsRetried, '{request}', 'Requests parked for a later attempt'],
    resultsPopped: [METRIC.resultsPopped, '{result}', 'Results delivered from routes'],
    resultsExpired: [METRIC.resultsExpired, '{result}', 'Results dropped after their TTL'],
  });
}

/** Instruments of the job queue (`@q/job-worker`). */
export interface JobMetrics {
  /** Attributes: `job.type`, `job.status` = succeeded | failed | dead_letter | cancelled. */
  completed: Counter;
  /** Seconds; attributes as {@link JobMetrics.completed}. */
  duration: Histogram;
  /** Attributes: `job.queue`. */
  claimed: Counter;
  /** Attributes: `job.type`. */
  leaseLost: Counter;
  /** Attributes: `q.operation`, `error.kind` = persistent | transient, `db.sqlstate`. Optional: instruments built elsewhere may lack it. */
  workerFailures?: Counter;
  /**
   * Attributes: `q.operation` = claim | maintenance. Rounds that found nothing to do: an idle
   * worker records no span, only this. Optional: instruments built elsewhere may lack it.
   */
  idleRounds?: Counter;
  /**
   * Seconds from a flow node's release (its last parent done) to its claim, both on the database
   * clock; attributes: `job.type`. Optional: instruments built elsewhere may lack it.
   */
  flowReleaseLatency?: Histogram;
}

/** Bucket boundaries (seconds) of {@link METRIC.jobsDuration}. */
export const JOB_DURATION_BUCKETS_S: readonly number[] = Object.freeze([
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600,
]);

/** Options of {@link jobMetrics}. */
export interface JobMetricsOptions {
  /**
   * Also record the {@link DEPRECATED_METRIC} names (`q.jobs.duration`). Default `true` for this
   * release, so existing dashboards keep their data while they move to the new names.
   */
  deprecatedNames?: boolean;
}

/** Creates the job-queue instruments. */
export function jobMetrics(meterProvider?: MeterProvider, opts: JobMetricsOptions = {}): JobMetrics {
  const m = qMeter(meterProvider);
  const durationOptions = {
    unit: 's',
    description: 'Duration of job attempts',
    // The SDK's default buckets (0…10 000) suit milliseconds; jobs run from ms to an hour.
    advice: { explicitBucketBoundaries: [...JOB_DURATION_BUCKETS_S] },
  };
  const duration = m.createHistogram(METRIC.jobsDuration, durationOptions);
  const legacy =
    (opts.deprecatedNames ?? true)
      ? m.createHistogram(DEPRECATED_METRIC.jobsDuration, { ...durationOptions, description: `Deprecated: use ${METRIC.jobsDuration}` })
      : undefined;
  const { completed, claimed, leaseLost, workerFailures, idleRounds } = counters(m, {
    completed: [METRIC.jobsCompleted, '{job}', 'Job attempts finished, by type and outcome'],
    claimed: [METRIC.jobsClaimed, '{job}', 'Jobs leased by workers'],
    leaseLost: [METRIC.jobsLeaseLost, '{job}', 'Running jobs whose lease was lost (handler aborted)'],
    workerFailures: [METRIC.jobsWorkerFailures, '{failure}', 'Database failures of worker loops (claim, maintenance), by kind'],
    idleRounds: [METRIC.jobsIdleRounds, '{round}', 'Worker rounds that found no work (empty claims, idle maintenance rounds)'],
  });
  const flowReleaseLatency = m.createHistogram(METRIC.flowsReleaseLatency, {
    unit: 's',
    description: 'Time from a flow node release (its last parent done) to its claim',
    advice: { explicitBucketBoundaries: [...JOB_DURATION_BUCKETS_S] },
  });
  return {
    completed,
    duration: legacy
      ? {
          record(value, attributes, context) {
            duration.record(value, attributes, context);
            legacy.record(value, attributes, context);
          },
        }
      : duration,
    claimed,
    leaseLost,
    workerFailures,
    idleRounds,
    flowReleaseLatency,
  };
}

/** Instruments of flows recorded where flows are inserted (`JobQueue.flow`). */
export interface FlowMetrics {
  /** Flows created; no attributes (flow names are the application's, unbounded). */
  started: Counter;
}

/** Creates the flow instruments. */
export function flowMetrics(meterProvider?: MeterProvider): FlowMetrics {
  return counters(qMeter(meterProvider), {
    started: [METRIC.flowsStarted, '{flow}', 'Flows inserted (created, not found by their idempotency key)'],
  });
}

/**
 * Instruments of per-group job limits (recorded by `JobStore` claims that pass `limits`).
 * Attributes name the limit by its queue and type (`*`: any), never by a group: groups are
 * unbounded (tenants), the limits a worker configures are not.
 */
export interface JobGroupMetrics {
  grants: Counter;
  refusals: Counter;
  wait: Histogram;
}

/** Creates the per-group limit instruments. */
export function jobGroupMetrics(meterProvider?: MeterProvider): JobGroupMetrics {
  const m = qMeter(meterProvider);
  return {
    ...counters(m, {
      grants: [METRIC.jobsGroupGrants, '{job}', 'Jobs leased under a per-group limit'],
      refusals: [METRIC.jobsGroupRefusals, '{group}', 'Groups a claim found at a limit (their next job left queued), once per claim'],
    }),
    wait: m.createHistogram(METRIC.jobsGroupWait, {
      unit: 's',
      description: 'Time jobs leased under a per-group limit waited, from runAt to the claim',
      advice: { explicitBucketBoundaries: [...JOB_DURATION_BUCKETS_S] },
    }),
  };
}

/** Instruments of `@q/quota`. Attributes: `quota.kind` = slots | rate, `quota.key_class`. */
export interface QuotaMetrics {
  grants: Counter;
  refusals: Counter;
}

/** Creates the quota instruments. */
export function quotaMetrics(meterProvider?: MeterProvider): QuotaMetrics {
  return counters(qMeter(meterProvider), {
    grants: [METRIC.quotaGrants, '{grant}', 'Quota units granted'],
    refusals: [METRIC.quotaRefusals, '{refusal}', 'Quota requests refused'],
  });
}

/**
 * The cardinality-safe class of a quota key: the part before the first `:` (`tenant:42` →
 * `tenant`), or `other`. Raw keys (user ids) never become metric attributes.
 */
export function quotaKeyClass(key: string): string {
  const i = key.indexOf(':');
  const cls = i > 0 ? key.slice(0, i) : 'other';
  return /^[a-zA-Z0-9_.-]{1,32}$/.test(cls) ? cls : 'other';
}

/**
 * Registers an observable gauge read from `read()` on every collection (backlog depth per queue,
 * partitions owned per owner). Returns a function that unregisters it.
 */
export function observeGauge(
  meterProvider: MeterProvider | undefined,
  name: string,
  options: { unit: string; description: string },
  read: () => Array<{ value: number; attributes: Attributes }> | Promise<Array<{ value: number; attributes: Attributes }>>,
): () => void {
  const gauge: ObservableGauge = qMeter(meterProvider).createObservableGauge(name, options);
  const cb = async (result: { observe: (v: number, a?: Attributes) => void }) => {
    for (const { value, attributes } of await read()) result.observe(value, attributes);
  };
  gauge.addCallback(cb);
  return () => gauge.removeCallback(cb);
}

/** What {@link observeBacklog} reads: `RequestStore` from `@q/store` fits. */
export interface BacklogSource {
  backlog(queue: string, now: number, windows: number[]): Promise<{ depth: number }>;
}

/**
 * Registers {@link METRIC.requestsBacklog}: pending requests per queue (attribute `queue`), read
 * from `source.backlog` on every collection (one statement per queue, only when a reader
 * collects). A queue whose read fails is skipped for that collection. `queues` may be a function
 * for a changing set. Returns a function that unregisters the gauge.
 */
export function observeBacklog(
  meterProvider: MeterProvider | undefined,
  source: BacklogSource,
  queues: readonly string[] | (() => readonly string[]),
): () => void {
  return observeGauge(
    meterProvider,
    METRIC.requestsBacklog,
    { unit: '{request}', description: 'Pending requests (not yet dispatched) per queue' },
    async () => {
      const list = typeof queues === 'function' ? queues() : queues;
      const now = Math.floor(Date.now() / 1000);
      const read = await Promise.allSettled(list.map((queue) => source.backlog(queue, now, [])));
      const out: Array<{ value: number; attributes: Attributes }> = [];
      list.forEach((queue, i) => {
        const r = read[i];
        if (r?.status === 'fulfilled') out.push({ value: r.value.depth, attributes: { queue } });
      });
      return out;
    },
  );
}
