// README example (@q/partition-consumer): enqueue requests, serve them with runPartitionWorker,
// collect the results, stop gracefully.
//   DATABASE_URL=postgres://… npx tsx examples/partition-worker.ts
import { randomBytes } from 'node:crypto';
import { runPartitionWorker } from '@q/partition-consumer';
import { RequestStore } from '@q/store';

export async function main(dsn = process.env.DATABASE_URL): Promise<string[]> {
  if (!dsn) throw new Error('set DATABASE_URL');
  const store = await RequestStore.open(dsn, { maxConns: 4 }); // creates the queue tables if needed
  try {
    // A producer enqueues requests (deadline in Unix seconds; payload bytes are opaque).
    const deadline = Math.floor(Date.now() / 1000) + 60;
    await store.enqueue(
      ['ada', 'grace', 'edsger'].map((name) => ({
        id: `greet-${name}`,
        token: randomBytes(8).toString('hex'), // one token per submission
        queue: 'greetings',
        deadline,
        envelope: JSON.stringify({ kind: 'greet' }),
        payload: Buffer.from(name),
      })),
    );

    // A worker serves the queue until `stop` aborts; run as many as you like, anywhere.
    const stop = new AbortController();
    const worker = runPartitionWorker({
      store,
      queue: 'greetings',
      concurrency: 4,
      batchSize: 10,
      leaseTtlMs: 3_000,
      drainTimeoutMs: 5_000,
      pollIntervalMs: 100,
      signal: stop.signal,
      async handle(req) {
        if (req.cancelled) return { result: { route: 'greetings-out', payload: 'cancelled' } };
        return { result: { route: 'greetings-out', payload: `hello, ${Buffer.from(req.payload).toString()}` } };
      },
    });

    // A consumer of results pops them from the route.
    const out: string[] = [];
    while (out.length < 3) {
      const results = await store.popResults('greetings-out', Math.floor(Date.now() / 1000), 10);
      out.push(...results.map((r) => r.payload));
      if (results.length === 0) await new Promise((r) => setTimeout(r, 50));
    }
    stop.abort(); // graceful: hands the partitions over, then returns
    await worker;
    return out.sort();
  } finally {
    await store.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log((await main()).join('\n'));
}
