/**
 * Where a default-options drain spends its CPU: `N` no-op jobs enqueued up front, then one
 * `Worker` (default options, `concurrency` C) drains them. Prints the rate, the CPU seconds of
 * this Node process and of the database backends that served it (read from /proc, so the server
 * must run on this machine), both per job, and the worker's round trips (count, jobs per trip,
 * mean time, most in flight at once).
 *
 *   DSN=postgres://… node bench/dist/cpu-split.js [--jobs 50000] [--concurrency 8] [--reps 3]
 *
 * It runs on a fresh schema of its own (dropped at the end); nothing else should run meanwhile.
 * With `CPU_PROFILE=<file>` the drain alone (not the enqueue before it) of the last repetition is
 * recorded as a V8 CPU profile (open it in Chrome DevTools' Performance panel). With
 * `HEAP_PROFILE=<file>` it is recorded instead as a sampling heap profile that keeps the objects
 * the garbage collector freed (where a drain allocates, not what it keeps; DevTools' Memory panel).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { JobStore } from '@q/store';
import { JobQueue, Worker } from '@q/job-worker';
import { cpuSeconds } from './backend-cpu.js';
import { toolArgs } from './tool-args.js';

const args = toolArgs();
const arg = args.num;
const dsn = args.dsn;
const JOBS = arg('jobs', 50_000);
const CONCURRENCY = arg('concurrency', 8);
const REPS = arg('reps', 3);
const QUEUE = 'cpu-split';

/** utime + stime of a process in seconds, or 0 when it has gone. */
function cpuSecondsOrZero(pid: number): number {
  try {
    return cpuSeconds(pid);
  } catch {
    return 0;
  }
}

interface TripStats {
  trips: number;
  jobs: number;
  ms: number;
  inFlight: number;
  maxInFlight: number;
}

/** Counts the worker's round trips by wrapping the store's hot-path methods. */
function countTrips(store: JobStore): TripStats {
  const stats: TripStats = { trips: 0, jobs: 0, ms: 0, inFlight: 0, maxInFlight: 0 };
  const methods = store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  for (const name of ['claim', 'complete', 'completeAndClaim']) {
    const original = methods[name]?.bind(store);
    if (!original) continue;
    methods[name] = async (...a: unknown[]) => {
      stats.trips++;
      stats.maxInFlight = Math.max(stats.maxInFlight, ++stats.inFlight);
      const t0 = performance.now();
      try {
        const r = await original(...a);
        if (name === 'claim' && Array.isArray(r)) stats.jobs += r.length;
        if (name === 'completeAndClaim') stats.jobs += (r as { jobs: unknown[] }).jobs.length;
        return r;
      } finally {
        stats.inFlight--;
        stats.ms += performance.now() - t0;
      }
    };
  }
  return stats;
}

/** What to record of the drain, and where to write it. */
interface ProfileRequest {
  kind: 'cpu' | 'heap';
  file: string;
}

/** Starts a CPU or an allocation profile of this process; `stop` writes it to the file. */
async function startProfile(kind: ProfileRequest['kind']): Promise<{ stop(file: string): Promise<void> }> {
  const session = new Session();
  session.connect();
  if (kind === 'cpu') {
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
  } else {
    // Every 4 KiB allocated on average; freed objects stay in, so short-lived garbage shows.
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 4096,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }
  return {
    async stop(file) {
      const { profile } = kind === 'cpu' ? await session.post('Profiler.stop') : await session.post('HeapProfiler.stopSampling');
      writeFileSync(file, JSON.stringify(profile));
      session.disconnect();
    },
  };
}

/** The profile asked for by `CPU_PROFILE` or `HEAP_PROFILE` (not both), if any. */
function profileRequest(): ProfileRequest | undefined {
  const cpu = process.env.CPU_PROFILE;
  const heap = process.env.HEAP_PROFILE;
  if (cpu && heap) throw new Error('cpu-split: set CPU_PROFILE or HEAP_PROFILE, not both');
  if (cpu) return { kind: 'cpu', file: cpu };
  return heap ? { kind: 'heap', file: heap } : undefined;
}

async function run(admin: pg.Pool, profile: ProfileRequest | undefined): Promise<Record<string, number>> {
  const schema = `cpu_split_${randomBytes(4).toString('hex')}`;
  const app = `q-cpu-split-${randomBytes(4).toString('hex')}`;
  const store = await JobStore.open(dsn, { schema, maxConns: CONCURRENCY + 2, applicationName: app });
  try {
    const queue = new JobQueue(store, { knownQueues: [QUEUE] });
    for (let from = 0; from < JOBS; from += 1_000) {
      await queue.enqueueMany(
        Array.from({ length: Math.min(1_000, JOBS - from) }, (_, k) => ({ queue: QUEUE, type: 'noop', payload: { i: from + k } })),
      );
    }
    const trips = countTrips(store);
    let done = 0;
    let finished: () => void = () => undefined;
    const allRan = new Promise<void>((resolve) => (finished = resolve));
    const worker = new Worker(store, { queues: [QUEUE], concurrency: CONCURRENCY });
    worker.register('noop', async () => {
      if (++done === JOBS) finished();
      return null;
    });
    const backends = async (): Promise<number[]> =>
      (await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [app])).rows.map((r) => r.pid);
    // Every backend the drain may use exists before it starts (the pool opens them on demand).
    await Promise.all(Array.from({ length: CONCURRENCY + 2 }, () => store.pool.query('SELECT pg_sleep(0.05)')));
    const pids = await backends();
    const dbBefore = pids.map(cpuSecondsOrZero).reduce((a, b) => a + b, 0);
    const profiler = profile ? await startProfile(profile.kind) : undefined;
    const nodeBefore = process.cpuUsage();
    const t0 = performance.now();
    const abort = new AbortController();
    const running = worker.run(abort.signal);
    await allRan;
    // Until the database shows every job finished (the last outcomes are written after the handlers).
    for (;;) {
      const { rows } = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".q_jobs WHERE status <> 'succeeded'`);
      if (Number(rows[0]?.n) === 0) break;
    }
    const seconds = (performance.now() - t0) / 1000;
    const node = process.cpuUsage(nodeBefore);
    const db = pids.map(cpuSecondsOrZero).reduce((a, b) => a + b, 0) - dbBefore;
    if (profiler && profile) await profiler.stop(profile.file);
    abort.abort();
    await running;
    await worker.wait(10_000);
    const nodeSeconds = (node.user + node.system) / 1e6;
    return {
      rate: Math.round(JOBS / seconds),
      seconds: Number(seconds.toFixed(2)),
      nodeCpuSeconds: Number(nodeSeconds.toFixed(2)),
      dbCpuSeconds: Number(db.toFixed(2)),
      nodeMicrosPerJob: Math.round((nodeSeconds / JOBS) * 1e6),
      dbMicrosPerJob: Math.round((db / JOBS) * 1e6),
      roundTrips: trips.trips,
      jobsPerTrip: Math.round(trips.jobs / Math.max(1, trips.trips)),
      msPerTrip: Number((trips.ms / Math.max(1, trips.trips)).toFixed(2)),
      maxTripsInFlight: trips.maxInFlight,
    };
  } finally {
    await store.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

async function main(): Promise<void> {
  const admin = new pg.Pool({ connectionString: dsn, max: 1 });
  try {
    for (let r = 0; r < REPS; r++) {
      const profile = r === REPS - 1 ? profileRequest() : undefined;
      console.log(JSON.stringify({ jobs: JOBS, concurrency: CONCURRENCY, ...(await run(admin, profile)) }));
    }
  } finally {
    await admin.end();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
