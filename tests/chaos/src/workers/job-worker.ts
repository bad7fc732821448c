// A worker process for the job-queue chaos scenarios. Handler "chaos.job" logs each execution
// (job, attempt, pid) in chaos_effects, fails 10 % of attempts, and returns who ran it.
import { Worker } from '@q/job-worker';
import { JobStore } from '@q/store';
import pg from 'pg';
import { jsonLogger } from '../jsonlog.js';

const dsn = process.env.Q_DSN;
const name = process.env.Q_NAME ?? `w${process.pid}`;
if (!dsn) throw new Error('Q_DSN is required');
const logger = jsonLogger(name);
const failRate = Number(process.env.Q_FAIL_RATE ?? 0.1);
const store = await JobStore.open(dsn, { maxConns: 6, applicationName: process.env.Q_APP ?? 'q-chaos-worker' });
const effects = new pg.Pool({ connectionString: dsn, max: 4, application_name: process.env.Q_APP ?? 'q-chaos-worker' });
effects.on('error', () => undefined);
const worker = new Worker(store, {
  queues: ['task'],
  concurrency: Number(process.env.Q_CONCURRENCY ?? 16),
  logger,
  retryBaseMs: 20,
  leaseDurationMs: Number(process.env.Q_LEASE_MS ?? 3000),
  pollIntervalMs: 200,
  maintenanceIntervalMs: 250,
});
worker.register('chaos.job', async (job) => {
  await effects.query('INSERT INTO chaos_effects (job_id, attempt, pid) VALUES ($1, $2, $3)', [job.id, job.attempt, process.pid]);
  await new Promise((r) => setTimeout(r, 1 + Math.floor(Math.random() * 4)));
  if (Math.random() < failRate) throw new Error('injected failure');
  return { pid: process.pid, attempt: job.attempt };
});
const stop = new AbortController();
process.on('SIGTERM', () => stop.abort());
logger.info({ pid: process.pid }, 'ready');
await worker.run(stop.signal);
await worker.wait(5_000);
logger.info({}, 'stopped');
await effects.end();
await store.close();
