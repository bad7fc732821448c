/**
 * Child process of the `partition-runners-p*` scenarios: opens a store, prints `ready`, waits for
 * `go` on stdin, then runs `runPartitionWorker` with a no-op handler (one result per request) until
 * SIGTERM, and exits 0 once the worker has drained and the store is closed.
 */
import { RequestStore } from '@q/store';
import { runPartitionWorker } from '@q/partition-consumer';

const dsn = process.env.BENCH_DSN as string;
const queue = process.env.BENCH_QUEUE as string;
const route = process.env.BENCH_ROUTE as string;
const owner = process.env.BENCH_OWNER as string;
const ttl = Number(process.env.BENCH_TTL_MS);

const stop = new AbortController();
process.once('SIGTERM', () => stop.abort());

const store = await RequestStore.open(dsn, { maxConns: 4 });
process.stdout.write('ready\n');
// Started together by the parent, so process start-up is not part of the measured time.
await new Promise<void>((resolve) => {
  let buf = '';
  process.stdin.on('data', (b: Buffer) => {
    buf += b.toString();
    if (buf.includes('go\n')) resolve();
  });
});
await runPartitionWorker({
  store,
  queue,
  owner,
  concurrency: 256,
  batchSize: 256,
  leaseTtlMs: ttl,
  drainTimeoutMs: 1_000,
  signal: stop.signal,
  handle: async () => ({ result: { route, payload: '' } }),
});
await store.close();
process.exit(0);
