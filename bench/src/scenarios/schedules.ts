// Recurring jobs at scale (issue 38): 1,000 schedules firing every minute, served by 1, 4 or 8
// workers. What one fired minute costs the database — statements sent and their round-trip time,
// idle ticks included — should not grow with the number of workers, since every slot is enqueued
// once whoever fires it. pg-boss's `schedule()` with the same 1,000 schedules, in the same run.
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import type { Measurement, RunContext, Scenario, System } from '../scenario.js';
import { benchPool, closeAll } from '../pg.js';
import { loadJobStore, loadJobWorker, missing, need } from '../systems/q-api.js';
import { check, waitUntil } from '../verify.js';

const SCHEDULES = 1_000;
const TARGET = 'sched';
/** One minute and a margin for a firing that takes a few seconds to write its jobs. */
const WINDOW_MS = 63_000;

/**
 * Counts every statement the `pg` clients of this process send while `on`, and the time from
 * sending to its reply (the database's time plus a local round trip). q and pg-boss both talk
 * to Postgres through `pg`, so the same counter serves both; the probe is not counted.
 */
class StatementMeter {
  on = false;
  statements = 0;
  ms = 0;
  #restore: (() => void) | undefined;

  install(): void {
    const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
    const original = proto.query;
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const meter = this;
    proto.query = function (this: unknown, ...args: unknown[]): unknown {
      if (!meter.on) return original.apply(this, args);
      meter.statements++;
      const t0 = performance.now();
      const done = (): void => {
        meter.ms += performance.now() - t0;
      };
      const last = args.length - 1;
      const cb = args[last];
      if (typeof cb === 'function') {
        args[last] = (...r: unknown[]) => {
          done();
          return (cb as (...a: unknown[]) => unknown)(...r);
        };
        return original.apply(this, args);
      }
      const result = original.apply(this, args);
      if (result !== null && typeof result === 'object' && typeof (result as Promise<unknown>).then === 'function') {
        (result as Promise<unknown>).then(done, done);
      }
      return result;
    };
    this.#restore = () => {
      proto.query = original;
    };
  }

  uninstall(): void {
    this.#restore?.();
  }
}

/**
 * Starts the workers and waits for their first firing (a system may first catch up the minute
 * before it started), then counts for {@link WINDOW_MS}: one minute in steady state — its idle
 * ticks, one firing and that firing's jobs — whatever second of the minute the run started at.
 * For q, exactly one slot of each schedule must have been enqueued in that window; a system that
 * falls behind its schedules shows it in `jobs` (1,000 a minute is keeping up).
 */
async function measure(
  ctx: RunContext,
  name: string,
  start: () => Promise<void>,
  jobs: () => Promise<{ total: number; distinct: number }>,
  exact: boolean,
): Promise<Measurement> {
  const meter = new StatementMeter();
  meter.install();
  try {
    await start();
    // The first firing's jobs (a system that falls behind: some of them).
    await waitUntil(async () => (await jobs()).total >= (exact ? SCHEDULES : 1), 120_000, `${name}: the first firing's jobs`);
    await new Promise((r) => setTimeout(r, 1_000));
    const before = (await jobs()).total;
    meter.on = true;
    await new Promise((r) => setTimeout(r, WINDOW_MS));
    meter.on = false;
    const after = await jobs();
    const enqueued = after.total - before;
    // q must enqueue each slot once; a system that falls behind enqueues fewer, which is reported.
    if (exact) check(enqueued === SCHEDULES, `${name}: ${enqueued} jobs enqueued in one minute by ${SCHEDULES} every-minute schedules`);
    check(after.total === after.distinct, `${name}: ${after.total - after.distinct} slots enqueued twice`);
    ctx.log(`${name}: ${meter.statements} statements, ${meter.ms.toFixed(0)} ms of round trips, ${enqueued} jobs in one minute`);
    return { statements: meter.statements, ms: meter.ms, jobs: enqueued };
  } finally {
    meter.on = false;
    meter.uninstall();
  }
}

function qSystem(workers: number): System {
  return {
    name: 'q',
    skip: () => missing(loadJobStore, loadJobWorker),
    async run(ctx) {
      const { JobStore } = await need(loadJobStore);
      const mod = (await import('@q/job-worker')) as unknown as {
        JobQueue: new (store: unknown, o: { knownQueues: string[] }) => { schedule(o: Record<string, unknown>): Promise<unknown> };
        Worker: new (store: unknown, o: Record<string, unknown>) => { run(signal: AbortSignal): Promise<void>; wait(ms: number): Promise<void> };
      };
      const admin = await JobStore.open(ctx.dsn, { maxConns: 2 });
      const stores: Array<{ close(): Promise<void> }> = [admin];
      const abort = new AbortController();
      const runs: Array<Promise<void>> = [];
      const probe = benchPool(ctx.dsn, 1, 'q schedules probe');
      try {
        const queue = new mod.JobQueue(admin, { knownQueues: [TARGET] });
        for (let i = 0; i < SCHEDULES; i++) await queue.schedule({ name: `s${i}`, cron: '* * * * *', type: 'tick', queue: TARGET });
        return await measure(
          ctx,
          `q ×${workers}`,
          async () => {
            for (let w = 0; w < workers; w++) {
              // Each worker its own store and pool, as separate processes have. Its queue is not
              // the schedules' target: the jobs stay, to be counted.
              const store = await JobStore.open(ctx.dsn, { maxConns: 4, migrate: false });
              stores.push(store);
              const worker = new mod.Worker(store, { queues: ['unused'], concurrency: 1 });
              runs.push(worker.run(abort.signal));
            }
          },
          async () => {
            const r = await probe.query<{ total: string; distinct: string }>(
              `SELECT count(*) AS total, count(DISTINCT idempotency_key) AS distinct
               FROM q_jobs_all WHERE queue = $1`,
              [TARGET],
            );
            return { total: Number(r.rows[0]?.total ?? 0), distinct: Number(r.rows[0]?.distinct ?? 0) };
          },
          true,
        );
      } finally {
        abort.abort();
        await Promise.allSettled(runs);
        await closeAll(...stores.map((s) => () => s.close()), () => probe.end());
      }
    },
  };
}

function pgBossSystem(workers: number): System {
  return {
    name: 'pg-boss',
    async run(ctx) {
      const bosses: PgBoss[] = [];
      const open = async (): Promise<PgBoss> => {
        // Scheduling on, maintenance off (as the job scenarios): only the cron pass and its
        // send-it workers run.
        const boss = new PgBoss({ connectionString: ctx.dsn, max: 4, supervise: false, schedule: true });
        boss.on('error', (err: unknown) => process.stderr.write(`pg-boss error: ${String(err)}\n`));
        bosses.push(boss);
        await boss.start();
        return boss;
      };
      const probe = benchPool(ctx.dsn, 1, 'pg-boss schedules probe');
      try {
        // Set up with scheduling off, so no cron pass runs before the measured workers start.
        const admin = new PgBoss({ connectionString: ctx.dsn, max: 2, supervise: false, schedule: false });
        admin.on('error', (err: unknown) => process.stderr.write(`pg-boss error: ${String(err)}\n`));
        await admin.start();
        try {
          await admin.createQueue(TARGET);
          for (let i = 0; i < SCHEDULES; i++) await admin.schedule(TARGET, '* * * * *', {}, { key: `s${i}` });
        } finally {
          await admin.stop({ graceful: false, close: true });
        }
        return await measure(
          ctx,
          `pg-boss ×${workers}`,
          async () => {
            for (let w = 0; w < workers; w++) await open();
          },
          async () => {
            // Its jobs do not name their slot: a slot sent twice shows as more than 1,000 in the minute.
            const r = await probe.query<{ total: string }>(`SELECT count(*) AS total FROM pgboss.job WHERE name = $1`, [TARGET]);
            const total = Number(r.rows[0]?.total ?? 0);
            return { total, distinct: total };
          },
          false,
        );
      } finally {
        await closeAll(...bosses.map((b) => () => b.stop({ graceful: false, close: true })), () => probe.end());
      }
    },
  };
}

/** 1,000 every-minute schedules, `workers` workers: statements and round-trip ms per fired minute. */
export function scheduleTick(workers: number): Scenario {
  return {
    name: `schedule-tick-w${workers}`,
    smokeWaitsFor: 'cron minutes on the wall clock (about 2 minutes per system)',
    title: `1,000 schedules every minute, ${workers} worker(s): database cost per fired minute`,
    metrics: [
      { key: 'statements', unit: 'statements/min', better: 'lower' },
      { key: 'ms', unit: 'ms/min', better: 'lower' },
      { key: 'jobs', unit: 'jobs/min', better: 'higher' },
    ],
    baseline: 'q',
    maxReps: 1,
    warmupFraction: 0,
    systems: [qSystem(workers), pgBossSystem(workers)],
  };
}
