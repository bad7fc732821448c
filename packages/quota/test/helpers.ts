import { createTestSchema, type TestSchema } from '@q/testing';

export { sleep, waitFor } from '@q/testing';
import pg from 'pg';
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
    `SELECT coalesce(sum(s.used), 0)::int AS n FROM q_quota_slots s JOIN q_quota_holders h USING (holder)
      WHERE s.key = $1 AND NOT h.lapsed AND h.expires_ms > (extract(epoch FROM clock_timestamp()) * 1000)::bigint`,
    [key],
  );
  return rows[0]!.n;
}

/** Moves a holder's lease end by `deltaMs` (negative: as if the clock had moved on). */
export async function shiftHolder(pool: pg.Pool, holder: string, deltaMs: number): Promise<void> {
  await pool.query(`UPDATE q_quota_holders SET expires_ms = expires_ms + $2 WHERE holder = $1`, [holder, deltaMs]);
}

/** Makes a holder lapsed as of now. */
export async function lapseHolder(pool: pg.Pool, holder: string): Promise<void> {
  await pool.query(`UPDATE q_quota_holders SET expires_ms = (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 1 WHERE holder = $1`, [
    holder,
  ]);
}

/** Ages every admission of `key` by `ms`: the same as the database clock moving `ms` forward for them. */
export async function ageAdmits(pool: pg.Pool, key: string, ms: number): Promise<void> {
  await pool.query(`UPDATE q_quota_admits SET at_ms = at_ms - $2 WHERE key = $1`, [key, ms]);
}

/** A database clock a test can step: every quota statement on {@link SteppableClock.dsn} reads it. */
export interface SteppableClock {
  /** DSN of `schema` whose connections read the steppable clock. */
  readonly dsn: string;
  /** Steps the clock to `offsetMs` from the real one (negative: behind it), for every connection at once. */
  set(offsetMs: number): Promise<void>;
}

/**
 * Makes the database clock of `schema` steppable, as an NTP step or a VM restore would move it.
 * The quota statements read the clock through an unqualified `clock_timestamp()`; this schema gets
 * its own `clock_timestamp()` (the real one plus an offset kept in a table), and the DSN puts the
 * schema before `pg_catalog` in `search_path`, so that one is found first. Nothing in `q` changes.
 */
export async function steppableClock(schema: TestSchema): Promise<SteppableClock> {
  const admin = new pg.Client({ connectionString: schema.serverDsn });
  await admin.connect();
  try {
    const s = `"${schema.name}"`;
    await admin.query(`CREATE TABLE ${s}.test_clock (offset_ms bigint NOT NULL)`);
    await admin.query(`INSERT INTO ${s}.test_clock VALUES (0)`);
    await admin.query(
      `CREATE FUNCTION ${s}.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE
         AS $$ SELECT pg_catalog.clock_timestamp() + (SELECT offset_ms FROM ${s}.test_clock) * interval '1 millisecond' $$`,
    );
  } finally {
    await admin.end();
  }
  const u = new URL(schema.dsn);
  u.searchParams.set('options', `-c search_path=${schema.name},pg_catalog`);
  return {
    dsn: u.toString(),
    async set(offsetMs: number) {
      await schema.pool().query(`UPDATE test_clock SET offset_ms = $1`, [offsetMs]);
    },
  };
}
