import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuotaHolderLapsedError, type QuotaStore } from '../src/index.js';
import type { TestSchema } from '@q/testing';
import pg from 'pg';
import { dbNowMs, lapseHolder, liveSlots, openTestStore, shiftHolder, sleep, waitFor } from './helpers.js';

let schema: TestSchema;
let store: QuotaStore;
let app: string;
const TTL = 60_000;

beforeAll(async () => {
  ({ schema, store, app } = await openTestStore('qslots'));
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
});

let seq = 0;
async function holder(ttlMs = TTL): Promise<string> {
  const name = `h${++seq}`;
  await store.registerQuotaHolder(name, ttlMs);
  return name;
}

describe('QuotaStore slots', () => {
  it('grants up to the limit across holders, per key', async () => {
    const [a, b] = [await holder(), await holder()];
    expect(await store.acquireQuotaSlots(a, 'k1', 2, 5)).toBe(2);
    expect(await store.acquireQuotaSlots(b, 'k1', 2, 5)).toBe(2);
    expect(await store.acquireQuotaSlots(b, 'k1', 4, 5)).toBe(1);
    expect(await store.acquireQuotaSlots(a, 'k1', 1, 5)).toBe(0);
    // Another key has its own count.
    expect(await store.acquireQuotaSlots(a, 'k2', 7, 5)).toBe(5);
    // The limit is per call: a gate with a higher limit on k1 sees the same 5 in use.
    expect(await store.acquireQuotaSlots(b, 'k1', 3, 7)).toBe(2);
    expect(await store.acquireQuotaSlots(a, 'k1', 1, 3)).toBe(0);
    expect(await store.acquireQuotaSlots(a, 'k1', 0, 9)).toBe(0);
    expect(await liveSlots(schema.pool(), 'k1')).toBe(7);
  });

  it('keeps the limit of the latest acquire per key, rewriting the key row only when it changes', async () => {
    const a = await holder();
    const row = async (key: string) =>
      (
        await schema
          .pool()
          .query<{ last_limit: number | null; xmin: string }>(`SELECT last_limit, xmin::text FROM q_quota_keys WHERE key = $1`, [key])
      ).rows[0];
    await store.acquireQuotaSlots(a, 'lim', 1, 4);
    const first = await row('lim');
    expect(first?.last_limit).toBe(4);
    // The same limit again (a grant of 0 too): no new row version.
    await store.acquireQuotaSlots(a, 'lim', 1, 4);
    await store.acquireQuotaSlots(a, 'lim', 9, 4);
    expect((await row('lim'))?.xmin).toBe(first?.xmin);
    await store.acquireQuotaSlots(a, 'lim', 1, 10);
    expect((await row('lim'))?.last_limit).toBe(10);
  });

  it('release never goes negative and touches only the holder’s own slots', async () => {
    const [a, b] = [await holder(), await holder()];
    expect(await store.acquireQuotaSlots(a, 'r1', 3, 10)).toBe(3);
    expect(await store.acquireQuotaSlots(b, 'r1', 2, 10)).toBe(2);
    await store.releaseQuotaSlots(a, ['r1', 'unknown-key'], [10, 1]);
    const { rows } = await schema
      .pool()
      .query<{ holder: string; used: number }>(`SELECT holder, used FROM q_quota_slots WHERE key = 'r1' ORDER BY holder`);
    expect(Object.fromEntries(rows.map((r) => [r.holder, r.used]))).toEqual({ [a]: 0, [b]: 2 });
    await store.releaseQuotaSlots(a, [], []); // harmless no-op
    await store.releaseQuotaSlots(b, ['r1'], [1]);
    expect(await liveSlots(schema.pool(), 'r1')).toBe(1);
  });

  it('a lapsed holder stops counting, cannot renew and cannot acquire', async () => {
    const [a, b] = [await holder(), await holder()];
    expect(await store.acquireQuotaSlots(a, 'l1', 4, 4)).toBe(4);
    expect(await store.acquireQuotaSlots(b, 'l1', 1, 4)).toBe(0);
    await lapseHolder(schema.pool(), a);
    expect(await store.renewQuotaHolder(a, TTL)).toBe(false);
    await expect(store.acquireQuotaSlots(a, 'l1', 1, 4)).rejects.toBeInstanceOf(QuotaHolderLapsedError);
    await expect(store.acquireQuotaSlots(a, 'l1', 1, 4)).rejects.toMatchObject({ code: 'QUOTA_HOLDER_LAPSED' });
    expect(await store.acquireQuotaSlots(b, 'l1', 4, 4)).toBe(4);
    // Never revived, even with a long TTL.
    expect(await store.renewQuotaHolder(a, 3_600_000)).toBe(false);
    expect(await liveSlots(schema.pool(), 'l1')).toBe(4);
  });

  it('unknown and deleted holders are lapsed too; deleting frees slots at once; a name is single-use', async () => {
    await expect(store.acquireQuotaSlots('nobody', 'd1', 1, 1)).rejects.toBeInstanceOf(QuotaHolderLapsedError);
    expect(await store.renewQuotaHolder('nobody', TTL)).toBe(false);
    const [a, b] = [await holder(), await holder()];
    expect(await store.acquireQuotaSlots(a, 'd1', 3, 3)).toBe(3);
    expect(await store.acquireQuotaSlots(b, 'd1', 1, 3)).toBe(0);
    await store.deleteQuotaHolder(a);
    await store.deleteQuotaHolder(a); // idempotent
    expect(await store.acquireQuotaSlots(b, 'd1', 3, 3)).toBe(3);
    await expect(store.acquireQuotaSlots(a, 'd1', 1, 9)).rejects.toBeInstanceOf(QuotaHolderLapsedError);
    // A name is single-use: registering a taken one fails (the client never reuses names).
    await expect(store.registerQuotaHolder(b, TTL)).rejects.toMatchObject({ code: 'DUPLICATE' });
    await lapseHolder(schema.pool(), b);
    await expect(store.registerQuotaHolder(b, TTL)).rejects.toMatchObject({ code: 'DUPLICATE' });
  });

  it('renewing keeps a holder’s slots past its original lease', async () => {
    const [a, b] = [await holder(2_000), await holder()];
    expect(await store.acquireQuotaSlots(a, 'n1', 2, 2)).toBe(2);
    expect(await store.renewQuotaHolder(a, TTL)).toBe(true);
    // Move a's clock 5 s on: without the renewal its 2 s lease would be over.
    await shiftHolder(schema.pool(), a, -5_000);
    expect(await store.acquireQuotaSlots(b, 'n1', 1, 2)).toBe(0);
    expect(await liveSlots(schema.pool(), 'n1')).toBe(2);
    const { rows } = await schema.pool().query<{ expires_ms: string }>(`SELECT expires_ms FROM q_quota_holders WHERE holder = $1`, [a]);
    expect(Number(rows[0]!.expires_ms)).toBeGreaterThan((await dbNowMs(schema.pool())) + TTL - 10_000);
  });

  it('a renewal waits for an acquire in progress on the holder’s keys, so it never revives a holder that acquire saw lapsed', async () => {
    const a = await holder();
    expect(await store.acquireQuotaSlots(a, 'w1', 1, 5)).toBe(1);
    // Stand in for an acquire on w1 that holds the key lock.
    const c = new pg.Client({ connectionString: schema.dsn });
    await c.connect();
    try {
      await c.query('BEGIN');
      await c.query(`SELECT 1 FROM q_quota_keys WHERE key = 'w1' FOR UPDATE`);
      const renewing = store.renewQuotaHolder(a, TTL);
      renewing.catch(() => undefined); // asserted below
      await waitFor(
        async () => {
          const { rows } = await schema
            .pool()
            .query(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE '%q_quota_renew%'`, [
              app,
            ]);
          return rows.length > 0;
        },
        20_000,
        'the renewal waiting on the key lock',
      );
      // While that acquire runs, the lease runs out (it counts the holder as lapsed)...
      await lapseHolder(schema.pool(), a);
      await c.query('COMMIT');
      // ...so the renewal that waited must not bring it back.
      expect(await renewing).toBe(false);
    } finally {
      await c.end();
    }
  });

  it('a real lease runs out on the database clock', async () => {
    const [a, b] = [await holder(300), await holder()];
    expect(await store.acquireQuotaSlots(a, 't1', 1, 1)).toBe(1);
    const { rows } = await schema.pool().query<{ expires_ms: string }>(`SELECT expires_ms FROM q_quota_holders WHERE holder = $1`, [a]);
    const expires = Number(rows[0]!.expires_ms);
    for (;;) {
      const granted = await store.acquireQuotaSlots(b, 't1', 1, 1);
      const after = await dbNowMs(schema.pool());
      if (granted === 1) {
        expect(after).toBeGreaterThan(expires);
        break;
      }
      await sleep(50);
    }
  });

  it('reapQuotaHolders keeps holders that lapsed within the grace period', async () => {
    const [old, recent, live] = [await holder(), await holder(), await holder()];
    await store.acquireQuotaSlots(old, 'g1', 1, 10);
    await store.acquireQuotaSlots(recent, 'g1', 1, 10);
    await store.acquireQuotaSlots(live, 'g1', 1, 10);
    const now = await dbNowMs(schema.pool());
    await schema.pool().query(`UPDATE q_quota_holders SET expires_ms = $2 WHERE holder = $1`, [old, now - 20_000]);
    await schema.pool().query(`UPDATE q_quota_holders SET expires_ms = $2 WHERE holder = $1`, [recent, now - 1_000]);
    await store.reapQuotaHolders(10_000);
    const { rows: holders } = await schema
      .pool()
      .query<{ holder: string }>(`SELECT holder FROM q_quota_holders WHERE holder = ANY($1) ORDER BY holder`, [[old, recent, live]]);
    expect(holders.map((r) => r.holder).sort()).toEqual([recent, live].sort());
    const { rows: slots } = await schema.pool().query<{ holder: string }>(`SELECT holder FROM q_quota_slots WHERE key = 'g1'`);
    expect(slots.map((r) => r.holder).sort()).toEqual([recent, live].sort());
  });

  it('4 holders × 6 workers × 40 rounds never hold more than the limit at once, and end at zero', async () => {
    const LIMIT = 5;
    const key = 'contended';
    const holders = [await holder(), await holder(), await holder(), await holder()];
    let inUse = 0;
    let peak = 0;
    let grants = 0;
    const worker = async (h: string) => {
      for (let round = 0; round < 40; round++) {
        const got = await store.acquireQuotaSlots(h, key, 1, LIMIT);
        if (got === 0) continue;
        // Counted only between the grant's reply and the release's send: inside the DB's interval.
        inUse += got;
        peak = Math.max(peak, inUse);
        grants += got;
        if (round % 3 === 0) await sleep(1);
        inUse -= got;
        await store.releaseQuotaSlots(h, [key], [got]);
      }
    };
    await Promise.all(holders.flatMap((h) => Array.from({ length: 6 }, () => worker(h))));
    expect(peak).toBeLessThanOrEqual(LIMIT);
    expect(peak).toBeGreaterThan(1); // the test really contended
    expect(grants).toBeGreaterThan(40);
    const { rows } = await schema.pool().query<{ n: number }>(`SELECT coalesce(sum(used), 0)::int AS n FROM q_quota_slots WHERE key = $1`, [key]);
    expect(rows[0]!.n).toBe(0);
  });

  it('rejects bad input with INVALID_ARGUMENT before any statement', async () => {
    const h = await holder();
    const bad: Array<() => Promise<unknown>> = [
      () => store.acquireQuotaSlots(h, '', 1, 1),
      () => store.acquireQuotaSlots(h, 'k', -1, 1),
      () => store.acquireQuotaSlots(h, 'k', 1.5, 1),
      () => store.acquireQuotaSlots(h, 'k', 1, -1),
      () => store.acquireQuotaSlots(h, 'k', 1, Number.NaN),
      () => store.acquireQuotaSlots('', 'k', 1, 1),
      () => store.releaseQuotaSlots(h, ['a', 'b'], [1]),
      () => store.releaseQuotaSlots(h, ['a'], [-1]),
      () => store.releaseQuotaSlots(h, [''], [1]),
      () => store.registerQuotaHolder(h, 0),
      () => store.registerQuotaHolder('x', 1.5),
      () => store.renewQuotaHolder(h, -5),
      () => store.reapQuotaHolders(-1),
      () => store.reapQuota(0),
    ];
    for (const call of bad) await expect(call()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const err = (await store.releaseQuotaSlots(h, ['a', 'b'], [1]).catch((e: unknown) => e)) as Error;
    expect(err.message).toContain('2 keys but 1 counts');
  });
});
