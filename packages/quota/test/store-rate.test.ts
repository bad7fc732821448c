import type { TestSchema } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QuotaStore } from '../src/index.js';
import { ageAdmits, openTestStore } from './helpers.js';

let schema: TestSchema;
let store: QuotaStore;
const HOUR = 3_600_000;

beforeAll(async () => {
  ({ schema, store } = await openTestStore('qrate'));
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
});

/** Sum of live admissions per window vs the window's running count. */
async function windowCounts(key: string): Promise<Array<{ window_ms: string; used: string; logged: string }>> {
  const { rows } = await schema.pool().query<{ window_ms: string; used: string; logged: string }>(
    `SELECT w.window_ms, w.used, coalesce((SELECT sum(n) FROM q_quota_admits a WHERE a.key = w.key AND a.window_ms = w.window_ms), 0) AS logged
       FROM q_quota_windows w WHERE w.key = $1 ORDER BY w.window_ms`,
    [key],
  );
  return rows;
}

describe('QuotaStore rate admission', () => {
  it('admits exactly as the trailing window slides (database clock)', async () => {
    const key = 'slide';
    const W = 60_000;
    expect(await store.admitQuota(key, 2, 3, W)).toBe(2);
    await ageAdmits(schema.pool(), key, 30_000); // those two are now 30 s old
    expect(await store.admitQuota(key, 5, 3, W)).toBe(1);
    expect(await store.admitQuota(key, 1, 3, W)).toBe(0);
    await ageAdmits(schema.pool(), key, 29_000); // 59 s and 29 s old: all still count
    expect(await store.admitQuota(key, 1, 3, W)).toBe(0);
    await ageAdmits(schema.pool(), key, 1_000); // 60 s: the first two expire exactly at one window
    expect(await store.admitQuota(key, 5, 3, W)).toBe(2);
    expect(await store.admitQuota(key, 1, 3, W)).toBe(0);
    await ageAdmits(schema.pool(), key, 31_000); // the 1 (61 s) expired, the 2 (31 s) count
    expect(await store.admitQuota(key, 5, 3, W)).toBe(1);
    expect(await store.admitQuota(key, 0, 3, W)).toBe(0);
    for (const w of await windowCounts(key)) expect(w.used).toBe(w.logged);
  });

  it('two window lengths on one key count separately', async () => {
    const key = 'two-windows';
    expect(await store.admitQuota(key, 10, 5, 1_000)).toBe(5);
    expect(await store.admitQuota(key, 10, 8, HOUR)).toBe(8);
    await ageAdmits(schema.pool(), key, 2_000);
    // The short window's admissions expired; the hour's did not (and were not deleted by it).
    expect(await store.admitQuota(key, 10, 5, 1_000)).toBe(5);
    expect(await store.admitQuota(key, 10, 8, HOUR)).toBe(0);
    const counts = await windowCounts(key);
    expect(counts.map((c) => [c.window_ms, c.used])).toEqual([
      ['1000', '5'],
      [String(HOUR), '8'],
    ]);
  });

  it('16 workers racing for a limit of 50 in a 1 h window admit exactly 50, five times over', async () => {
    for (let round = 0; round < 5; round++) {
      const key = `race-${round}`;
      let admitted = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          for (let i = 0; i < 5; i++) {
            const got = await store.admitQuota(key, 1, 50, HOUR);
            admitted += got;
          }
        }),
      );
      expect(admitted).toBe(50);
      const [w] = await windowCounts(key);
      expect(w).toEqual({ window_ms: String(HOUR), used: '50', logged: '50' });
    }
  });

  it('reapQuota removes expired admissions and keeps the next admission exact', async () => {
    const key = 'reap-rate';
    const W = 10_000;
    expect(await store.admitQuota(key, 2, 5, W)).toBe(2);
    expect(await store.admitQuota(key, 1, 5, HOUR)).toBe(1); // another window on the key
    await ageAdmits(schema.pool(), key, 6_000);
    expect(await store.admitQuota(key, 2, 5, W)).toBe(2);
    await ageAdmits(schema.pool(), key, 5_000); // the first 2 are 11 s old (expired), the next 2 are 5 s old
    const changed = await store.reapQuota(1000);
    expect(changed).toBeGreaterThanOrEqual(2); // at least: the expired row deleted + its window's count updated
    const counts = await windowCounts(key);
    for (const c of counts) expect(c.used).toBe(c.logged);
    expect(counts.map((c) => [c.window_ms, c.used])).toEqual([
      [String(W), '2'],
      [String(HOUR), '1'],
    ]);
    // Exactly 3 more fit in the 10 s window after the reap, and the hour window still counts its 1.
    expect(await store.admitQuota(key, 9, 5, W)).toBe(3);
    expect(await store.admitQuota(key, 9, 5, HOUR)).toBe(4);
    // An emptied window disappears, and the next admission in it starts from zero.
    await ageAdmits(schema.pool(), key, HOUR);
    await store.reapQuota(1000);
    const { rows } = await schema.pool().query(`SELECT 1 FROM q_quota_windows WHERE key = $1`, [key]);
    expect(rows).toHaveLength(0);
    expect(await store.admitQuota(key, 9, 5, W)).toBe(5);
  });

  it('reapQuota deletes empty slots and unused keys but never a slot in use', async () => {
    await store.registerQuotaHolder('rq', HOUR);
    expect(await store.acquireQuotaSlots('rq', 'rk1', 2, 5)).toBe(2);
    expect(await store.acquireQuotaSlots('rq', 'rk2', 1, 5)).toBe(1);
    await store.releaseQuotaSlots('rq', ['rk1'], [2]);
    await store.reapQuota(1000);
    const { rows: slots } = await schema
      .pool()
      .query<{ key: string; used: number }>(`SELECT key, used FROM q_quota_slots WHERE holder = 'rq' ORDER BY key`);
    expect(slots).toEqual([{ key: 'rk2', used: 1 }]);
    const { rows: keys } = await schema.pool().query<{ key: string }>(`SELECT key FROM q_quota_keys WHERE key IN ('rk1', 'rk2')`);
    expect(keys.map((k) => k.key)).toEqual(['rk2']);
    expect(await store.acquireQuotaSlots('rq', 'rk1', 9, 5)).toBe(5);
  });

  it('reapQuota running alongside admits and acquires never loses count', async () => {
    await store.registerQuotaHolder('rc', HOUR);
    let stop = false;
    const reaper = (async () => {
      let reaps = 0;
      while (!stop || reaps < 3) {
        await store.reapQuota(50);
        reaps += 1;
      }
      return reaps;
    })();
    let inUse = 0;
    let peak = 0;
    const slotsKey = 'race-slots';
    const workers = Array.from({ length: 6 }, async (_, w) => {
      for (let i = 0; i < 40; i++) {
        // Short windows expire all the time, so the reaper has work on the same rows.
        await store.admitQuota(`race-rate-${w % 2}`, 1, 3, 5);
        const got = await store.acquireQuotaSlots('rc', slotsKey, 1, 2);
        if (got) {
          inUse += 1;
          peak = Math.max(peak, inUse);
          inUse -= 1;
          await store.releaseQuotaSlots('rc', [slotsKey], [1]);
        }
      }
    });
    await Promise.all(workers);
    stop = true;
    expect(await reaper).toBeGreaterThanOrEqual(3);
    expect(peak).toBeLessThanOrEqual(2);
    for (const key of ['race-rate-0', 'race-rate-1']) {
      for (const c of await windowCounts(key)) expect(c.used).toBe(c.logged);
    }
    const { rows } = await schema
      .pool()
      .query<{ n: number }>(`SELECT coalesce(sum(used), 0)::int AS n FROM q_quota_slots WHERE key = $1`, [slotsKey]);
    expect(rows[0]!.n).toBe(0);
  });

  it('rejects bad rate arguments with INVALID_ARGUMENT', async () => {
    for (const call of [
      () => store.admitQuota('', 1, 1, 1000),
      () => store.admitQuota('k', -1, 1, 1000),
      () => store.admitQuota('k', 1, 1.2, 1000),
      () => store.admitQuota('k', 1, 1, 0),
      () => store.admitQuota('k', 1, 1, 10.5),
    ]) {
      await expect(call()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
  });
});
