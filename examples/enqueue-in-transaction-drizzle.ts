// README example ("Enqueue in your transaction", Drizzle): inside db.transaction of
// drizzle-orm/node-postgres, drizzleClient(tx) hands q the transaction's connection. Also shows
// q_enqueue_job, the SQL entry point, from a trigger on the app's table.
//   DATABASE_URL=postgres://… npx tsx examples/enqueue-in-transaction-drizzle.ts
import { JobQueue, drizzleClient } from '@q/job-worker';
import { JobStore } from '@q/store';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { pgTable, serial, text } from 'drizzle-orm/pg-core';
import pg from 'pg';

const signups = pgTable('signups', { id: serial('id').primaryKey(), email: text('email').notNull() });

export async function main(dsn = process.env.DATABASE_URL): Promise<Array<{ type: string; payload: unknown }>> {
  if (!dsn) throw new Error('set DATABASE_URL');
  const pool = new pg.Pool({ connectionString: dsn });
  pool.on('error', () => undefined);
  const db = drizzle(pool);
  try {
    const store = await JobStore.fromPool(pool);
    const queue = new JobQueue(store, { knownQueues: ['default'] });
    await db.execute(sql`CREATE TABLE IF NOT EXISTS signups (id serial PRIMARY KEY, email text NOT NULL)`);
    // Any producer, in any language, or a trigger: SELECT … FROM q_enqueue_job(queue, type, payload, options).
    await db.execute(sql`
      CREATE OR REPLACE FUNCTION signups_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM q_enqueue_job('default', 'crm.sync', jsonb_build_object('signupId', NEW.id),
                              jsonb_build_object('idempotencyKey', 'crm-' || NEW.id));
        RETURN NEW;
      END $$`);
    await db.execute(sql`CREATE OR REPLACE TRIGGER signups_enqueue AFTER INSERT ON signups FOR EACH ROW EXECUTE FUNCTION signups_enqueue()`);

    await db.transaction(async (tx) => {
      const [row] = await tx.insert(signups).values({ email: 'ada@example.com' }).returning();
      if (!row) throw new Error('the insert returned no row');
      await queue.enqueue({ type: 'email.welcome', payload: { signupId: row.id } }, { client: drizzleClient(tx) });
    });
    await db
      .transaction(async (tx) => {
        await tx.insert(signups).values({ email: 'bob@example.com' });
        await queue.enqueue({ type: 'email.welcome' }, { client: drizzleClient(tx) });
        tx.rollback(); // neither the row, nor its trigger's job, nor the welcome email job
      })
      .catch(() => undefined);

    const page = await queue.list({ limit: 10 });
    await store.close();
    return page.jobs.map((j) => ({ type: j.type, payload: j.payload })).sort((a, b) => a.type.localeCompare(b.type));
  } finally {
    await pool.end();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await main());
