import { performance } from 'node:perf_hooks';
import type { Measurement, RunContext, Scenario } from '../scenario.js';
import { graphileWorker } from '../systems/graphile.js';
import type { JobSystem } from '../systems/jobs.js';
import { pgBoss } from '../systems/pgboss.js';
import { qJobs } from '../systems/q-jobs.js';
import { check, VerificationError } from '../verify.js';
import { asSystem, drainRun } from './jobs.js';

// Job groups (issue 40): a per-group concurrency limit held across a drain, and how long a
// group's first job waits behind another group's backlog.

const BATCH = 1_000;
const CONCURRENCY = 8;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Groups of `job-groups-limit`, and the jobs of one group that may run at once. */
export const LIMIT_GROUPS = 100;
export const GROUP_LIMIT = 4;

/**
 * Job `i`'s group: round-robin over the groups. The layout kindest to a fetch that takes the
 * oldest jobs first (pg-boss): its next 100 jobs span 100 groups, so its group limit cuts little
 * from a batch; with one group's jobs in a block it would keep 4 of each 100 it reads.
 */
const groupOf = (i: number) => i % LIMIT_GROUPS;
const groupName = (i: number) => `tenant:${groupOf(i)}`;

/** `js` whose batch enqueues put job `i` in group `group(i)`. */
function withGroups(js: JobSystem, group: (i: number) => string): JobSystem {
  return {
    ...js,
    async open(dsn, poolSize, opts) {
      const h = await js.open(dsn, poolSize, opts);
      return { ...h, enqueueBatch: (from, n) => h.enqueueBatch(from, n, group) };
    },
  };
}

/** Jobs of each group running at once, counted by the handlers, and the most seen. */
class GroupPeak {
  private readonly running = new Uint32Array(LIMIT_GROUPS);
  peak = 0;
  start(i: number): void {
    const g = groupOf(i);
    const n = (this.running[g] as number) + 1;
    this.running[g] = n;
    if (n > this.peak) this.peak = n;
  }
  end(i: number): void {
    this.running[groupOf(i)] = (this.running[groupOf(i)] as number) - 1;
  }
  /** Jobs still counted as running. */
  get inFlight(): number {
    return this.running.reduce((a, b) => a + b, 0);
  }
}

/** One turn of the event loop: long enough for the jobs in flight to overlap, short enough not to bound the rate. */
const yieldOnce = () => new Promise<void>((r) => setImmediate(r));

/**
 * `job-groups-limit`: 20,000 jobs over 100 groups (round-robin), at most 4 of a group running
 * at once, workers at concurrency 8, timed as the drains are. Each handler counts its group's
 * jobs in flight at its start and after one turn of the event loop (a no-op would start and end
 * in one tick and overlap nothing); `over` = the most of one group seen at once minus the limit.
 * `q` = a Worker with `limits: [{ concurrency: 4 }]`; `q-ungrouped` = the same jobs without a
 * group and a Worker without limits (its `over` counts the group each job would have had: what
 * the limit holds back); pg-boss = its `groupConcurrency` 4 (fleet-wide, counted in the database)
 * with the drain's settings, each job of a fetched batch running its handler concurrently (all
 * of them are active).
 */
export function jobGroupsLimit(): Scenario {
  const variants: Array<{ js: JobSystem; grouped: boolean }> = [
    { js: qJobs(), grouped: true },
    { js: qJobs('q-ungrouped'), grouped: false },
    { js: pgBoss, grouped: true },
  ];
  return {
    name: 'job-groups-limit',
    title: `job groups: 20,000 jobs over ${LIMIT_GROUPS} groups, ${GROUP_LIMIT} per group at once, concurrency ${CONCURRENCY}`,
    maxReps: 5,
    warmupFraction: 0.05,
    metrics: [
      { key: 'rate', unit: 'jobs/s', better: 'higher' },
      { key: 'over', unit: 'jobs', better: 'lower' },
    ],
    baseline: 'q',
    systems: variants.map(({ js, grouped }) =>
      asSystem(js, async (ctx) => {
        const peak = new GroupPeak();
        const { rate } = await drainRun(grouped ? withGroups(js, groupName) : js, ctx.n(20_000, 400), CONCURRENCY, ctx.dsn, (h, handle) =>
          h.startWorkers({
            concurrency: CONCURRENCY,
            mode: 'throughput',
            handle: (p) => {
              handle(p);
              peak.start(p.i);
            },
            work: async (p) => {
              await yieldOnce();
              peak.end(p.i);
            },
            ...(grouped ? { groupConcurrency: GROUP_LIMIT } : {}),
          }),
        );
        check(peak.inFlight === 0, `${js.name}: ${peak.inFlight} handlers never ended`);
        ctx.log(`at most ${peak.peak} jobs of one group running at once (limit ${GROUP_LIMIT}${grouped ? '' : ', not set'})`);
        return { rate, over: Math.max(0, peak.peak - GROUP_LIMIT) };
      }),
    ),
  };
}

/** `job-groups-fair`: group A's backlog, its handler time, and how long B's job may wait. */
const FAIR_BACKLOG = 10_000;
const HANDLER_MS = 50;
const FAIR_CAP_MS = 30_000;
/** A's jobs started before B's job is enqueued: every slot has turned over at least twice. */
const FLOWING = 20;

/**
 * `job-groups-fair`: group A has 10,000 queued jobs whose handler takes 50 ms, workers at
 * concurrency 8; once 20 of A's jobs have started, group B enqueues one job, and its delay is
 * the time from that enqueue call returning to B's handler starting (the same process, the same
 * clock). If B has not started after 30 s the run records 30,000 ms (the cap; the report marks
 * it). `q` = a Worker with its default options (fairness on, no limits); pg-boss = A and B as
 * groups on send (it limits groups but does not interleave them), 4 fetch loops of 2 jobs each
 * run at once, so 8 run as in q (its drains' 100 per fetch would put 800 in flight; at 1 per
 * fetch it waits out its 0.5 s poll after every job, since it ignores `burstWhenBatchFull`
 * there); graphile-worker has no groups: the same task, FIFO, in its latency settings.
 */
export function jobGroupsFair(): Scenario {
  const systems: JobSystem[] = [qJobs(), pgBoss, graphileWorker];
  return {
    name: 'job-groups-fair',
    title: `job groups: one job of group B behind 10,000 of group A (${HANDLER_MS} ms handlers, concurrency ${CONCURRENCY})`,
    // A peer's run waits out the 30 s cap: three runs each keep a full run near its budget.
    maxReps: 3,
    metrics: [
      {
        key: 'delay',
        unit: 'ms',
        better: 'lower',
        cap: FAIR_CAP_MS,
        capNote: `group B's job had not started ${FAIR_CAP_MS / 1000} s after its enqueue (the run stopped waiting; it waits behind A's backlog)`,
      },
    ],
    baseline: 'q',
    systems: systems.map((js) => asSystem(js, (ctx) => fairRun(js, ctx))),
  };
}

async function fairRun(js: JobSystem, ctx: RunContext): Promise<Measurement> {
  const n = ctx.n(FAIR_BACKLOG, 200);
  const b = n; // B's job: the index after A's
  const h = await js.open(ctx.dsn, CONCURRENCY + 4);
  const starts = new Uint16Array(n + 1);
  let bStartedAt: number | undefined;
  let aStarted = 0;
  let onFlowing: () => void = () => undefined;
  let onB: () => void = () => undefined;
  const flowing = new Promise<void>((r) => (onFlowing = r));
  const bStarted = new Promise<void>((r) => (onB = r));
  let closed = false;
  try {
    for (let from = 0; from < n; from += BATCH) {
      await h.enqueueBatch(from, Math.min(BATCH, n - from), js.groups ? () => 'A' : undefined);
    }
    const stored = await h.waiting();
    check(stored === n, `${js.name}: ${stored} jobs stored after enqueueing ${n}`);
    await h.startWorkers({
      concurrency: CONCURRENCY,
      mode: 'latency',
      // pg-boss: 4 fetch loops of 2 jobs, 8 running as in the others (see jobGroupsFair).
      batchSize: 2,
      handle: (p) => {
        if (!Number.isInteger(p.i) || p.i < 0 || p.i > b) throw new VerificationError(`handled an unknown job ${String(p.i)}`);
        starts[p.i] = (starts[p.i] as number) + 1;
        if (p.i === b) {
          bStartedAt ??= performance.now();
          onB();
        } else if (++aStarted === FLOWING) onFlowing();
      },
      work: () => sleep(HANDLER_MS),
    });
    check(await within(flowing, 60_000), `${js.name}: ${FLOWING} of group A's jobs had not started after 60 s`);
    await h.enqueueOne(b, js.groups ? 'B' : undefined);
    const enqueuedAt = performance.now();
    const aBefore = aStarted;
    check(aBefore < n, `${js.name}: group A had drained before B was enqueued: no backlog to wait behind`);
    const inTime = await within(bStarted, FAIR_CAP_MS);
    const aAt = aStarted;
    closed = true;
    await h.close();
    const twice = starts.reduce((k, c) => k + (c > 1 ? 1 : 0), 0);
    check(twice === 0, `${js.name}: ${twice} jobs started more than once`);
    if (!inTime || bStartedAt === undefined) {
      ctx.log(`B had not started after ${FAIR_CAP_MS} ms (capped); ${aAt - aBefore} of A's jobs started meanwhile, ${n - aAt} left`);
      return { delay: FAIR_CAP_MS };
    }
    // A start before the enqueue call returned (its reply still in flight) waited for nothing.
    const delay = Math.max(0, bStartedAt - enqueuedAt);
    ctx.log(`B started after ${delay.toFixed(1)} ms; ${aAt - aBefore} of A's jobs started meanwhile, ${n - aAt} left`);
    return { delay };
  } finally {
    if (!closed) await h.close().catch(() => undefined);
  }
}

/** Whether `p` settled within `ms` (its timer cleared either way). */
async function within(p: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
