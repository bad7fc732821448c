// ConnectionPlacement on JobStore (issue 18): behind a transaction pooler the listener's LISTEN
// runs only on listenDsn; without one the store does not LISTEN at all and says so.
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { JobStore } from '../src/index.js';

let schema: TestSchema;

beforeAll(async () => {
  schema = await createTestSchema('place');
});
afterAll(async () => {
  await schema?.drop();
});

const listening = async (app: string) =>
  (
    await schema
      .pool()
      .query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'`, [app])
  ).rows[0]!.n;

it("pooler: 'transaction' without listenDsn: notifies is false and the listener never connects", async () => {
  const store = await JobStore.open(schema.dsn, { maxConns: 2, pooler: 'transaction', applicationName: 'q-place-off' });
  try {
    expect(store.notifies).toBe(false);
    const l = store.listen({ onNotification: () => undefined });
    await l.start();
    await new Promise((r) => setTimeout(r, 200));
    expect(l.connected).toBe(false);
    expect(await listening('q-place-off')).toBe(0);
  } finally {
    await store.close();
  }
});

it('with listenDsn the listener LISTENs there, and a direct store notifies as before', async () => {
  const store = await JobStore.open(schema.dsn, { maxConns: 2, pooler: 'transaction', listenDsn: schema.dsn, applicationName: 'q-place-on' });
  const direct = await JobStore.open(schema.dsn, { maxConns: 2 });
  try {
    expect(store.notifies).toBe(true);
    expect(direct.notifies).toBe(true);
    const got: string[] = [];
    const l = store.listen({ onNotification: (n) => n.kind === 'queued' && got.push(n.queue) });
    await l.start();
    expect(l.connected).toBe(true);
    expect(await listening('q-place-on')).toBe(1);
    await direct.enqueue([{ queue: 'placed', type: 't' }]);
    await expect.poll(() => got, { timeout: 5_000 }).toContain('placed');
  } finally {
    await Promise.all([store.close(), direct.close()]);
  }
});

it('refuses a bad pooler or listenDsn with INVALID_ARGUMENT', async () => {
  await expect(JobStore.open(schema.dsn, { pooler: 'session' as 'transaction' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  await expect(JobStore.open(schema.dsn, { listenDsn: '' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
});
