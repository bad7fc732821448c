// README example (@q/store): a producer enqueues requests, a dispatcher leases partitions,
// dispatches, handles and acks them, and the producer pops the results from its route.
//   DATABASE_URL=postgres://… npx tsx examples/store-request-queue.ts
import { randomBytes } from 'node:crypto';
import { RequestStore, stampOf, type Completion } from '@q/store';

export async function main(dsn = process.env.DATABASE_URL): Promise<string[]> {
  if (!dsn) throw new Error('set DATABASE_URL');
  const store = await RequestStore.open(dsn, { maxConns: 4 }); // migrates the 'requests' tables
  try {
    // Producer: each submission gets a fresh generation token; deadlines are Unix seconds.
    const now = Math.floor(Date.now() / 1000);
    await store.enqueue(
      ['alpha', 'beta', 'gamma'].map((word) => ({
        id: `greet-${word}`,
        token: randomBytes(16).toString('hex'),
        queue: 'greetings',
        deadline: now + 60,
        envelope: JSON.stringify({ replyTo: 'greetings-results' }),
        payload: Buffer.from(word),
      })),
    );

    // Dispatcher: lease partitions on the database clock, then dispatch → handle → ack.
    const owner = `dispatcher-${randomBytes(4).toString('hex')}`;
    await store.ensurePartitions('greetings');
    await store.acquirePartitions('greetings', owner, await store.now(), 30_000, 64);
    for (;;) {
      const batch = await store.dispatch('greetings', owner, await store.now(), 16);
      if (batch.length === 0) break;
      const completions: Completion[] = batch.map((req) => ({
        ...stampOf(req),
        route: (JSON.parse(req.envelope) as { replyTo: string }).replyTo,
        payload: JSON.stringify({ hello: Buffer.from(req.payload).toString() }),
        expiresAt: now + 3600, // results wait an hour for their reader
      }));
      const acked = await store.ack(owner, completions); // false = fenced (lease lost meanwhile)
      if (acked.includes(false)) await store.resetStale('greetings', owner);
    }
    await store.leave('greetings', owner); // hand the partitions back at once

    // Producer again: read the results in order.
    const results = await store.popResults('greetings-results', Math.floor(Date.now() / 1000), 100);
    return results.map((r) => `${r.id}: ${r.payload}`);
  } finally {
    await store.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log((await main()).join('\n'));
}
