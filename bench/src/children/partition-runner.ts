/**
 * Child process of the `partition-redelivery` scenario: runs `runPartitionWorker` on the queue
 * named in the environment with a handler that never finishes, printing `got <id>` per request it
 * is handed, until the parent SIGKILLs it.
 */
import { RequestStore } from '@q/store';
import { runPartitionWorker } from '@q/partition-consumer';

const dsn = process.env.BENCH_DSN as string;
const queue = process.env.BENCH_QUEUE as string;
const ttl = Number(process.env.BENCH_TTL_MS);

const store = await RequestStore.open(dsn, { maxConns: 4 });
await runPartitionWorker({
  store,
  queue,
  owner: 'doomed',
  concurrency: 1_000,
  batchSize: 256,
  leaseTtlMs: ttl,
  drainTimeoutMs: ttl,
  signal: new AbortController().signal,
  handle: (req) => {
    process.stdout.write(`got ${req.id}\n`);
    return new Promise(() => undefined);
  },
});
