// README example ("Enqueue in your transaction", pg): the order row and its job commit together —
// or neither does. The app owns the pool; q writes through the transaction's client.
//   DATABASE_URL=postgres://… npx tsx examples/enqueue-in-transaction-pg.ts
import { JobQueue } from '@q/job-worker';
import { JobStore, type Job } from '@q/store';
import pg from 'pg';

export async function main(dsn = process.env.DATABASE_URL): Promise<{ committed: Job; orders: number; jobs: number }> {
  if (!dsn) throw new Error('set DATABASE_URL');
  const pool = new pg.Pool({ connectionString: dsn });
  pool.on('error', () => undefined); // an idle connection lost: pg replaces it on demand
  try {
    await pool.query('CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, item text NOT NULL)');
    const store = await JobStore.fromPool(pool); // migrates the jobs table; close() leaves the pool open
    const queue = new JobQueue(store, { knownQueues: ['default'] });

    const placeOrder = async (item: string, fail: boolean): Promise<Job> => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const { rows } = await client.query<{ id: number }>('INSERT INTO orders (item) VALUES ($1) RETURNING id', [item]);
        const [order] = rows;
        if (!order) throw new Error('the insert returned no row');
        const job = await queue.enqueue(
          { type: 'order.confirm', payload: { orderId: order.id }, idempotencyKey: `confirm-${order.id}` },
          { client }, // in this transaction: the job exists iff it commits; workers wake at COMMIT
        );
        if (fail) throw new Error('payment declined');
        await client.query('COMMIT');
        return job;
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      } finally {
        client.release();
      }
    };

    const committed = await placeOrder('lamp', false);
    await placeOrder('chair', true).catch(() => undefined); // rolled back: no order, no job
    await store.close();

    const count = async (table: string) => (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]?.n ?? 0; // count(*) always returns one row
    return { committed, orders: await count('orders'), jobs: await count('q_jobs') };
  } finally {
    await pool.end();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await main();
  console.log(`job ${r.committed.uuid} (${r.committed.status}); ${r.orders} order(s), ${r.jobs} job(s)`);
}
