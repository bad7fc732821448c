/**
 * What a batch enqueue costs the application: `JobQueue.enqueueMany` of `--batch` no-op jobs,
 * `--batches` times in a row on one connection (after five batches of warm-up), each batch
 * awaited before the next. Prints the rate, the wall time per batch and this process's CPU per
 * batch (user + system): the rest of a batch's time is the database's and the round trip's.
 * With `--single N`, each run also enqueues N jobs one `JobQueue.enqueue` at a time (one commit
 * each, as `job-enqueue`'s single phase does) and prints that rate, with the Node CPU and the
 * database CPU (its backends' utime + stime, read from /proc: the server must run on this
 * machine) per call.
 *
 *   DSN=postgres://… node bench/dist/enqueue-cpu.js [--batch 1000] [--batches 20] [--reps 3] [--single 3000]
 *
 * It runs on a fresh schema of its own (dropped at the end); nothing else should run meanwhile.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { JobStore } from '@q/store';
import { JobQueue } from '@q/job-worker';
import { cpuSeconds } from './backend-cpu.js';
import { toolArgs } from './tool-args.js';

const args = toolArgs();
const BATCH = args.num('batch', 1_000);
const BATCHES = args.num('batches', 20);
const REPS = args.num('reps', 3);
const SINGLE = args.num('single', 0);
const QUEUE = 'enqueue-cpu';

const batch = (from: number) => Array.from({ length: BATCH }, (_, k) => ({ queue: QUEUE, type: 'noop', payload: { i: from + k } }));

async function main(): Promise<void> {
  const schema = `bench_enqueue_cpu_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Pool({ connectionString: args.dsn, max: 1 });
  const app = `q-enqueue-cpu-${randomBytes(4).toString('hex')}`;
  const store = await JobStore.open(args.dsn, { schema, maxConns: 2, applicationName: app });
  /** CPU seconds the store's backends have used so far. */
  const backendSeconds = async (): Promise<number> => {
    const { rows } = await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [app]);
    return rows.reduce((sum, r) => sum + cpuSeconds(r.pid), 0);
  };
  try {
    const queue = new JobQueue(store, { knownQueues: [QUEUE] });
    for (let i = 0; i < 5; i++) await queue.enqueueMany(batch(i * BATCH));
    for (let rep = 0; rep < REPS; rep++) {
      const cpu = process.cpuUsage();
      const t0 = performance.now();
      for (let i = 0; i < BATCHES; i++) await queue.enqueueMany(batch(i * BATCH));
      const ms = performance.now() - t0;
      const used = process.cpuUsage(cpu);
      let single: { single: number; singleRate: number; singleNodeCpuUs: number; singleDbCpuUs: number } | undefined;
      if (SINGLE > 0) {
        const db0 = await backendSeconds();
        const cpu0 = process.cpuUsage();
        const s0 = performance.now();
        for (let i = 0; i < SINGLE; i++) await queue.enqueue({ queue: QUEUE, type: 'noop', payload: { i } });
        const wall = performance.now() - s0;
        const node = process.cpuUsage(cpu0);
        single = {
          single: SINGLE,
          singleRate: Math.round(SINGLE / (wall / 1000)),
          singleNodeCpuUs: Math.round((node.user + node.system) / SINGLE),
          singleDbCpuUs: Math.round((((await backendSeconds()) - db0) * 1e6) / SINGLE),
        };
      }
      console.log(
        JSON.stringify({
          batch: BATCH,
          batches: BATCHES,
          rate: Math.round((BATCHES * BATCH) / (ms / 1000)),
          msPerBatch: Number((ms / BATCHES).toFixed(2)),
          nodeCpuMsPerBatch: Number(((used.user + used.system) / 1000 / BATCHES).toFixed(2)),
          ...single,
        }),
      );
    }
  } finally {
    await store.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

await main();
