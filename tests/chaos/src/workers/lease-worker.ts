// A worker process for the heartbeat-loss and paused-prefetch scenarios. Handler "chaos.lease" runs for the duration
// its payload asks (cut short when its signal aborts) and prints one "exec" line per execution
// with its wall-clock start and end, so the scenario can tell whether two executions of one job
// ever overlapped.
import { Worker } from '@q/job-worker';
import { JobStore } from '@q/store';
import { jsonLogger } from '../jsonlog.js';

const dsn = process.env.Q_DSN;
const name = process.env.Q_NAME ?? `w${process.pid}`;
if (!dsn) throw new Error('Q_DSN is required');
const logger = jsonLogger(name);
const store = await JobStore.open(dsn, { maxConns: 6, applicationName: 'q-chaos-worker' });
const worker = new Worker(store, {
  queues: (process.env.Q_QUEUES ?? 'task').split(','),
  concurrency: Number(process.env.Q_CONCURRENCY ?? 16),
  ...(process.env.Q_PREFETCH ? { prefetch: Number(process.env.Q_PREFETCH) } : {}),
  logger,
  retryBaseMs: 20,
  leaseDurationMs: Number(process.env.Q_LEASE_MS ?? 3000),
  pollIntervalMs: 100,
  maintenanceIntervalMs: 100,
});
worker.register('chaos.lease', async (job, { signal }) => {
  const start = Date.now();
  const ms = Number((job.payload as { ms?: number }).ms ?? 10);
  let aborted = false;
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, ms);
      signal.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          aborted = true;
          reject(signal.reason);
        },
        { once: true },
      );
    });
    return { pid: process.pid, attempt: job.attempt };
  } finally {
    logger.info({ job_uuid: job.uuid, start, end: Date.now(), aborted, pid: process.pid }, 'exec');
  }
});
// "chaos.block" blocks the event loop for the duration its payload asks (once per process): a
// scenario SIGSTOPs the process meanwhile, so the pause lands while a handler holds the only slot.
let blocked = false;
worker.register('chaos.block', (job) => {
  if (blocked) return Promise.resolve({ pid: process.pid });
  blocked = true;
  logger.info({ job_uuid: job.uuid, pid: process.pid }, 'block started');
  const until = Date.now() + Number((job.payload as { ms?: number }).ms ?? 1_000);
  while (Date.now() < until);
  return Promise.resolve({ pid: process.pid });
});
const stop = new AbortController();
process.on('SIGTERM', () => stop.abort());
logger.info({ pid: process.pid }, 'ready');
await worker.run(stop.signal);
await worker.wait(10_000);
logger.info({}, 'stopped');
await store.close();
