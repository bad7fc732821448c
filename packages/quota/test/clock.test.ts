import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuotaStore, createQuota, silentLogger, type Logger } from '../src/index.js';
import { dbNowMs, liveSlots, steppableClock, waitFor, type SteppableClock } from './helpers.js';

// Database clock steps (NTP, VM restore), made by moving the clock every quota statement reads.
let schema: TestSchema;
let clock: SteppableClock;
let store: QuotaStore;

beforeAll(async () => {
  schema = await createTestSchema('qclock');
  clock = await steppableClock(schema);
  store = await QuotaStore.open(clock.dsn, { maxConns: 4 });
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
});

let seq = 0;
async function holder(ttlMs: number): Promise<string> {
  const name = `c${++seq}`;
  await store.registerQuotaHolder(name, ttlMs);
  return name;
}

describe('database clock steps', () => {
  it('the steppable clock moves what the quota statements read', async () => {
    const before = await dbNowMs(store.pool);
    await clock.set(3_600_000);
    expect((await dbNowMs(store.pool)) - before).toBeGreaterThanOrEqual(3_600_000);
    await clock.set(0);
    expect(Math.abs((await dbNowMs(store.pool)) - before)).toBeLessThan(60_000);
  });

  it('a holder seen lapsed by its renewal is not revived when the clock steps back', async () => {
    const a = await holder(10_000);
    expect(await store.acquireQuotaSlots(a, 'b1', 1, 1)).toBe(1);
    await clock.set(20_000); // forward past its lease
    expect(await store.renewQuotaHolder(a, 10_000)).toBe(false);
    await clock.set(0); // and back: its old lease end is in the future again
    expect(await store.renewQuotaHolder(a, 10_000)).toBe(false);
    await expect(store.acquireQuotaSlots(a, 'b1', 1, 1)).rejects.toMatchObject({ code: 'QUOTA_HOLDER_LAPSED' });
    expect(await liveSlots(store.pool, 'b1')).toBe(0);
  });

  it('a holder another acquire counted as lapsed stays lapsed after a backward step: the limit holds', async () => {
    const [a, b] = [await holder(10_000), await holder(600_000)];
    expect(await store.acquireQuotaSlots(a, 'b2', 2, 2)).toBe(2);
    await clock.set(20_000);
    // b's acquire counts a as lapsed and is granted a's two slots...
    expect(await store.acquireQuotaSlots(b, 'b2', 2, 2)).toBe(2);
    await clock.set(0);
    // ...so after the step back a must not count, renew, or acquire again.
    expect(await liveSlots(store.pool, 'b2')).toBe(2);
    expect(await store.acquireQuotaSlots(b, 'b2', 1, 2)).toBe(0);
    expect(await store.renewQuotaHolder(a, 10_000)).toBe(false);
    await expect(store.acquireQuotaSlots(a, 'b2', 1, 2)).rejects.toMatchObject({ code: 'QUOTA_HOLDER_LAPSED' });
    expect(await liveSlots(store.pool, 'b2')).toBe(2);
  });

  it('an acquire on its own lapsed holder records the lapse too', async () => {
    const a = await holder(10_000);
    expect(await store.acquireQuotaSlots(a, 'b3', 1, 3)).toBe(1);
    await clock.set(20_000);
    await expect(store.acquireQuotaSlots(a, 'b3', 1, 3)).rejects.toMatchObject({ code: 'QUOTA_HOLDER_LAPSED' });
    await clock.set(0);
    expect(await store.renewQuotaHolder(a, 10_000)).toBe(false);
    expect(await liveSlots(store.pool, 'b3')).toBe(0);
  });

  it('a backward step alone lapses nothing, and a forward step shorter than the lease lapses nothing', async () => {
    const a = await holder(30_000);
    expect(await store.acquireQuotaSlots(a, 'b4', 1, 1)).toBe(1);
    await clock.set(-60_000);
    expect(await store.renewQuotaHolder(a, 30_000)).toBe(true);
    await clock.set(0); // forward by 60 s from the renewal at -60 s: ends that 30 s lease
    expect(await store.renewQuotaHolder(a, 30_000)).toBe(false);
    const b = await holder(30_000);
    expect(await store.acquireQuotaSlots(b, 'b4', 1, 1)).toBe(1);
    await clock.set(10_000); // shorter than b's lease
    expect(await store.renewQuotaHolder(b, 30_000)).toBe(true);
    await clock.set(0);
    expect(await liveSlots(store.pool, 'b4')).toBe(1);
  });

  it('a Quota client whose holder lapsed in a forward step learns it and never revives it after the step back', async () => {
    const warnings: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (_fields, msg) => void warnings.push(String(msg)) };
    const quota = await createQuota({ dsn: clock.dsn, ttlMs: 1_500, maxConns: 2, logger, holderPrefix: 'step' });
    try {
      const release = await quota.acquire('b5', 1);
      expect(release).not.toBeNull();
      const [h] = quota.holders;
      await clock.set(60_000);
      // Another client's acquire relies on the lapse (the forward step's documented effect).
      const other = await holder(600_000);
      expect(await store.acquireQuotaSlots(other, 'b5', 1, 1)).toBe(1);
      await clock.set(0);
      // The next renewal says no: the client retires the holder and warns about its grant in use.
      await waitFor(() => warnings.some((w) => w.includes('lapsed with grants in use')), 10_000, 'the lapse noticed');
      const { rows } = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_quota_holders WHERE holder = $1 AND NOT lapsed`, [
        h,
      ]);
      expect(rows[0]!.n).toBe(0);
      expect(await liveSlots(store.pool, 'b5')).toBe(1);
      expect(await quota.acquire('b5', 1)).toBeNull(); // a fresh holder; the other client's slot counts
      await release!();
    } finally {
      await quota.close();
    }
  });
});
