import { performance } from 'node:perf_hooks';
import type { Scenario, System } from '../scenario.js';
import { percentile } from '../stats.js';
import { ExactlyOnce, check, waitUntil } from '../verify.js';
import { graphileBatchJobs, graphileWorker } from '../systems/graphile.js';
import type { JobHarness, JobSystem, NoopPayload } from '../systems/jobs.js';
import { pgBoss } from '../systems/pgboss.js';
import { qJobs } from '../systems/q-jobs.js';
import { rawSqlJobs } from '../systems/raw-jobs.js';

/** The contenders of every job scenario, q first (the baseline of the ratios). */
export const JOB_SYSTEMS: JobSystem[] = [qJobs(), graphileWorker, pgBoss, rawSqlJobs];

const BATCH = 1_000;

/** A job system as a scenario's contender running `run` (its skip check kept). */
export function asSystem(js: JobSystem, run: System['run']): System {
  return { name: js.name, ...(js.skip ? { skip: () => (js.skip as () => Promise<string | undefined>)() } : {}), run };
}

/** Enqueues `n` jobs in batches of {@link BATCH}. */
async function fill(h: { enqueueBatch(from: number, n: number): Promise<void> }, n: number): Promise<void> {
  for (let from = 0; from < n; from += BATCH) await h.enqueueBatch(from, Math.min(BATCH, n - from));
}

/**
 * Job enqueue: first one call (one transaction) per job, sequentially; then the system's batch
 * API, 1,000 jobs per call. Both into the same fresh table.
 */
export function jobEnqueue(systems = JOB_SYSTEMS): Scenario {
  return {
    name: 'job-enqueue',
    title: 'job enqueue: one job per call (sequential), and batches of 1,000',
    metrics: [
      { key: 'single', unit: 'jobs/s', better: 'higher' },
      { key: 'batch', unit: 'jobs/s', better: 'higher' },
    ],
    baseline: 'q',
    systems: systems.map((js) =>
      asSystem(js, async (ctx) => {
        const singles = ctx.n(500, 20);
        const batched = ctx.n(20_000, 2_000);
        const h = await js.open(ctx.dsn, 2);
        try {
          let t0 = performance.now();
          for (let i = 0; i < singles; i++) await h.enqueueOne(i);
          const single = singles / ((performance.now() - t0) / 1000);
          t0 = performance.now();
          for (let from = 0; from < batched; from += BATCH) await h.enqueueBatch(singles + from, Math.min(BATCH, batched - from));
          const batch = batched / ((performance.now() - t0) / 1000);
          const stored = await h.waiting();
          check(stored === singles + batched, `${js.name}: ${stored} jobs stored after enqueueing ${singles + batched}`);
          return { single, batch };
        } finally {
          await h.close();
        }
      }),
    ),
  };
}

/**
 * Drain: `n` no-op jobs enqueued up front (not timed), then workers at `concurrency` started; timed
 * until the database shows every job durably completed. Each job must have run exactly once.
 */
export function jobDrain(concurrency: number, systems = JOB_SYSTEMS): Scenario {
  return {
    name: `job-drain-c${concurrency}`,
    ...(concurrency !== 8 ? { smokeCoveredBy: 'job-drain-c8' } : {}),
    title: `job drain, 50,000 no-op jobs, concurrency ${concurrency}`,
    // A run takes seconds, and on a shared machine two came out up to 40 % apart: five per system.
    maxReps: 5,
    warmupFraction: 0.05,
    metrics: [{ key: 'rate', unit: 'jobs/s', better: 'higher' }],
    baseline: 'q',
    systems: systems.map((js) => asSystem(js, (ctx) => drainRun(js, ctx.n(50_000, 300), concurrency, ctx.dsn))),
  };
}

/** Jobs per batch and batches in flight of {@link jobWorkMany}. */
const WORKMANY_BATCH = 100;
const WORKMANY_IN_FLIGHT = 4;

/**
 * Batch handlers: 50,000 no-op jobs drained by a handler that takes up to 100 at once, four
 * batches in flight, in each system's batch API — q's `workMany` (a row, lease and outcome per
 * job), pg-boss's batched `work` (the same), and graphile-worker's batch jobs (100 items in one
 * job's array payload: one row per batch, batched when enqueued). Rates are of items; enqueue is
 * timed apart (1,000 items per call), since graphile-worker writes a hundredth of the rows.
 */
export function jobWorkMany(): Scenario {
  const systems: JobSystem[] = [qJobs(), graphileBatchJobs(WORKMANY_BATCH), pgBoss];
  return {
    name: 'job-workmany',
    title: 'batch handlers: 50,000 no-op jobs, batches of 100, 4 batches in flight',
    maxReps: 5,
    metrics: [
      { key: 'rate', unit: 'jobs/s', better: 'higher' },
      { key: 'enqueue', unit: 'jobs/s', better: 'higher' },
    ],
    baseline: 'q',
    systems: systems.map((js) =>
      asSystem(js, async (ctx) => {
        const n = ctx.n(50_000, 500);
        let enqueueS = 0;
        const { rate } = await drainRun(
          { ...js, open: async (dsn, pool) => timedFill(await js.open(dsn, pool), (s) => (enqueueS = s)) },
          n,
          WORKMANY_BATCH * WORKMANY_IN_FLIGHT,
          ctx.dsn,
          async (h, handle) => {
            check(h.startBatchWorkers !== undefined, `${js.name}: no batch API`);
            await h.startBatchWorkers({ batches: WORKMANY_IN_FLIGHT, batchSize: WORKMANY_BATCH, handle });
          },
          WORKMANY_IN_FLIGHT + 4,
        );
        return { rate, enqueue: n / enqueueS };
      }),
    ),
  };
}

/** `h` whose enqueueBatch calls are timed together (drainRun fills before it starts its clock). */
function timedFill(h: JobHarness, report: (seconds: number) => void): JobHarness {
  let total = 0;
  return {
    ...h,
    async enqueueBatch(from, n, group) {
      const t0 = performance.now();
      await h.enqueueBatch(from, n, group);
      total += (performance.now() - t0) / 1000;
      report(total);
    },
  };
}

/**
 * One drain run; exported for the OpenTelemetry scenario. `start` starts the workers (default:
 * `startWorkers` at `concurrency`, throughput mode); `poolSize` defaults to `concurrency + 2`.
 */
export async function drainRun(
  js: JobSystem,
  n: number,
  concurrency: number,
  dsn: string,
  start?: (h: JobHarness, handle: (p: NoopPayload) => void) => Promise<void>,
  poolSize = concurrency + 2,
): Promise<{ rate: number }> {
  const h = await js.open(dsn, poolSize);
  const seen = new ExactlyOnce(n);
  let closed = false;
  try {
    await fill(h, n);
    const stored = await h.waiting();
    check(stored === n, `${js.name}: ${stored} jobs stored after enqueueing ${n}`);
    const t0 = performance.now();
    const handle = (p: NoopPayload): void => seen.hit(p.i);
    await (start ? start(h, handle) : h.startWorkers({ concurrency, mode: 'throughput', handle }));
    await seen.all(600_000);
    // Timed until no job is left unfinished (each system's cheapest probe of its backlog); the
    // completions are counted afterwards, untimed (see jobs-history.ts for why).
    await waitUntil(async () => (await h.waiting()) === 0, 60_000, `${js.name}: no job left unfinished`);
    const s = (performance.now() - t0) / 1000;
    const done = await h.completed();
    check(done === n, `${js.name}: ${done} completions recorded, expected ${n}`);
    closed = true;
    await h.close();
    seen.verify(`${js.name} drain`); // also catches a job run again while stopping
    return { rate: n / s };
  } finally {
    if (!closed) await h.close().catch(() => undefined);
  }
}

/**
 * Enqueue → handler-start latency: jobs enqueued at a steady 200/s (open loop), workers idle and
 * woken by each system's notification path. Latency is measured from the enqueue call to the
 * start of the handler, in the same process (same clock).
 */
export function jobLatency(systems = JOB_SYSTEMS): Scenario {
  return {
    name: 'job-latency',
    title: 'enqueue → handler start at 200 jobs/s (concurrency 8)',
    metrics: [
      { key: 'p50', unit: 'ms', better: 'lower' },
      { key: 'p99', unit: 'ms', better: 'lower' },
    ],
    baseline: 'q',
    systems: systems.map((js) =>
      asSystem(js, async (ctx) => {
        const measured = ctx.n(800, 40);
        // The first jobs open the pools' connections: sent at the same rate, not measured.
        const warm = Math.min(100, Math.ceil(measured / 4));
        const n = warm + measured;
        const perSecond = 200;
        const h = await js.open(ctx.dsn, 12);
        const seen = new ExactlyOnce(n);
        const sentAt = new Float64Array(n);
        const startedAt = new Float64Array(n);
        let closed = false;
        try {
          await h.startWorkers({
            concurrency: 8,
            mode: 'latency',
            handle: (p) => {
              startedAt[p.i] = performance.now();
              seen.hit(p.i);
            },
          });
          await new Promise((r) => setTimeout(r, 300)); // workers idle and listening
          const t0 = performance.now();
          const sends: Array<Promise<void>> = [];
          for (let i = 0; i < n; i++) {
            const due = t0 + (i * 1000) / perSecond;
            const wait = due - performance.now();
            if (wait > 0) await new Promise((r) => setTimeout(r, wait));
            sentAt[i] = performance.now();
            sends.push(h.enqueueOne(i));
          }
          await Promise.all(sends);
          await seen.all(60_000);
          await waitUntil(async () => (await h.completed()) >= n, 60_000, `${js.name}: ${n} completions recorded`);
          const done = await h.completed();
          check(done === n, `${js.name}: ${done} completions recorded, expected ${n}`);
          closed = true;
          await h.close();
          seen.verify(`${js.name} latency`);
          const lat = Array.from({ length: measured }, (_, k) => (startedAt[warm + k] as number) - (sentAt[warm + k] as number));
          return { p50: percentile(lat, 50), p99: percentile(lat, 99) };
        } finally {
          if (!closed) await h.close().catch(() => undefined);
        }
      }),
    ),
  };
}
