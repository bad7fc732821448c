import { createTestSchema, type TestSchema } from '@q/testing';
import type pg from 'pg';
import { QuotaStore } from '../src/index.js';

/** A fresh schema with the quota module migrated, and a store on it. */
export async function openTestStore(prefix: string, maxConns = 8): Promise<{ schema: TestSchema; store: QuotaStore; app: string }> {
  const schema = await createTestSchema(prefix);
  // A unique application_name: tests that look at pg_stat_activity see only their own connections.
  const app = `${schema.name}-store`;
  const store = await QuotaStore.open(schema.dsn, { maxConns, applicationName: app });
  return { schema, store, app };
}

/** The database clock in ms, as the quota functions read it. */
export async function dbNowMs(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ ms: string }>(`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms`);
  return Number(rows[0]!.ms);
}

/** Slots of `key` in use by live holders (the count acquires compare with the limit). */
export async function liveSlots(pool: pg.Pool, key: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT coalesce(sum(s.used), 0)::int AS n FROM async_quota_slots s JOIN async_quota_holders h USING (holder)
      WHERE s.key = $1 AND h.expires_ms > (extract(epoch FROM clock_timestamp()) * 1000)::bigint`,
    [key],
  );
  return rows[0]!.n;
}

/** Moves a holder's lease end by `deltaMs` (negative: as if the clock had moved on). */
export async function shiftHolder(pool: pg.Pool, holder: string, deltaMs: number): Promise<void> {
  await pool.query(`UPDATE async_quota_holders SET expires_ms = expires_ms + $2 WHERE holder = $1`, [holder, deltaMs]);
}

/** Makes a holder lapsed as of now. */
export async function lapseHolder(pool: pg.Pool, holder: string): Promise<void> {
  await pool.query(
    `UPDATE async_quota_holders SET expires_ms = (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 1 WHERE holder = $1`,
    [holder],
  );
}

/** Ages every admission of `key` by `ms`: the same as the database clock moving `ms` forward for them. */
export async function ageAdmits(pool: pg.Pool, key: string, ms: number): Promise<void> {
  await pool.query(`UPDATE async_quota_admits SET at_ms = at_ms - $2 WHERE key = $1`, [key, ms]);
}

/** Polls `check` until it returns true, or fails after `timeoutMs`. */
export async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs = 20_000, what = 'condition'): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
