// A dispatcher process for chaos scenario 1: serves queue "chaos" with runPartitionWorker and
// writes, as each result, who produced it under which lease (owner, partition, epoch, attempt).
import { runPartitionWorker } from '@q/partition-consumer';
import { RequestStore } from '@q/store';
import { jsonLogger } from '../jsonlog.js';

const dsn = process.env.Q_DSN;
const owner = process.env.Q_OWNER;
if (!dsn || !owner) throw new Error('Q_DSN and Q_OWNER are required');
const logger = jsonLogger(owner);
const store = await RequestStore.open(dsn, { maxConns: 6, applicationName: 'q-chaos-dispatcher' });
const stop = new AbortController();
process.on('SIGTERM', () => stop.abort());
logger.info({ owner }, 'ready');
const stats = await runPartitionWorker({
  store,
  queue: 'chaos',
  owner,
  concurrency: 32,
  batchSize: 64,
  leaseTtlMs: Number(process.env.Q_LEASE_TTL_MS ?? 1500),
  drainTimeoutMs: 1000,
  pollIntervalMs: 50,
  logger,
  signal: stop.signal,
  async handle(req) {
    await new Promise((r) => setTimeout(r, 1 + Math.floor(Math.random() * 5)));
    const payload = JSON.stringify({ owner, partition: req.partition, epoch: req.epoch, attempt: req.attempt });
    return { result: { route: 'chaos-results', payload } };
  },
});
logger.info({ ...stats }, 'stopped');
await store.close();
