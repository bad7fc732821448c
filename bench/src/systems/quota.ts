import pg from 'pg';
import { loadQuota, missing, need } from './q-api.js';

/** One quota system on a run's database: the two operations the quota scenarios call. */
export interface QuotaHarness {
  /** True if admitted. */
  admit(key: string, limit: number, windowMs: number): Promise<boolean>;
  /** A release function, or null when the key is at its limit. */
  acquire(key: string, limit: number): Promise<(() => Promise<void>) | null>;
  /** Slots held right now on `key` (verifies that every release landed). */
  inUse(key: string): Promise<number>;
  close(): Promise<void>;
}

/** A quota implementation the quota scenarios compare. */
export interface QuotaSystem {
  name: string;
  skip?(): Promise<string | undefined>;
  open(dsn: string, poolSize: number): Promise<QuotaHarness>;
}

const sumSlots = async (pool: pg.Pool, key: string) =>
  Number((await pool.query<{ n: string | null }>('SELECT sum(used) AS n FROM async_quota_slots WHERE key = $1', [key])).rows[0]?.n ?? 0);

/** `q`: the `Quota` client (own holder, concurrent callers of a key batched into one statement). */
export const qQuotaClient: QuotaSystem = {
  name: 'q',
  skip: () => missing(loadQuota),
  async open(dsn, poolSize) {
    const { createQuota } = await need(loadQuota);
    const quota = await createQuota({ dsn, maxConns: poolSize, ttlMs: 60_000 });
    const probe = new pg.Pool({ connectionString: dsn, max: 1 });
    return {
      admit: (key, limit, windowMs) => quota.admit(key, limit, windowMs),
      acquire: (key, limit) => quota.acquire(key, limit),
      inUse: (key) => sumSlots(probe, key),
      async close() {
        await quota.close();
        await probe.end();
      },
    };
  },
};

/** `q-store`: `QuotaStore` called directly, one statement per operation, one registered holder. */
export const qQuotaStore: QuotaSystem = {
  name: 'q-store',
  skip: () => missing(loadQuota),
  async open(dsn, poolSize) {
    const { QuotaStore } = await need(loadQuota);
    const store = await QuotaStore.open(dsn, { maxConns: poolSize });
    const holder = 'bench-holder';
    await store.registerQuotaHolder(holder, 60_000);
    const probe = new pg.Pool({ connectionString: dsn, max: 1 });
    return {
      admit: async (key, limit, windowMs) => (await store.admitQuota(key, 1, limit, windowMs)) === 1,
      async acquire(key, limit) {
        const got = await store.acquireQuotaSlots(holder, key, 1, limit);
        return got === 1 ? () => store.releaseQuotaSlots(holder, [key], [1]) : null;
      },
      inUse: (key) => sumSlots(probe, key),
      async close() {
        await store.close();
        await probe.end();
      },
    };
  },
};

/**
 * The raw-SQL limit: a counter row per key (`used < limit` checked in the UPDATE, so it is exact
 * under concurrency) for slots, and a PL/pgSQL function that locks the key's row, counts its
 * trailing window and logs the admission, in one round trip. No holders, no leases: a crashed
 * caller's slots are never given back — what q pays for is exactly that.
 */
const RAW_SCHEMA = `
CREATE TABLE raw_slots (key text PRIMARY KEY, used integer NOT NULL);
CREATE TABLE raw_admit_keys (key text PRIMARY KEY);
CREATE TABLE raw_admits (key text NOT NULL, at timestamptz NOT NULL);
CREATE INDEX raw_admits_key_at ON raw_admits (key, at);
CREATE FUNCTION raw_admit(p_key text, p_limit integer, p_window_ms bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE n integer;
BEGIN
  INSERT INTO raw_admit_keys VALUES (p_key) ON CONFLICT DO NOTHING;
  PERFORM 1 FROM raw_admit_keys WHERE key = p_key FOR UPDATE;
  SELECT count(*) INTO n FROM raw_admits WHERE key = p_key AND at > clock_timestamp() - p_window_ms * interval '1 millisecond';
  IF n >= p_limit THEN RETURN false; END IF;
  INSERT INTO raw_admits VALUES (p_key, clock_timestamp());
  RETURN true;
END $$;
`;

const acquireSql = {
  name: 'raw_slots_acquire',
  text: `INSERT INTO raw_slots AS s (key, used) VALUES ($1, 1)
         ON CONFLICT (key) DO UPDATE SET used = s.used + 1 WHERE s.used < $2
         RETURNING used`,
};
const releaseSql = { name: 'raw_slots_release', text: 'UPDATE raw_slots SET used = used - 1 WHERE key = $1 AND used > 0' };
const admitSql = { name: 'raw_admit', text: 'SELECT raw_admit($1, $2, $3) AS ok' };

export const rawSqlQuota: QuotaSystem = {
  name: 'raw-sql',
  async open(dsn, poolSize) {
    const pool = new pg.Pool({ connectionString: dsn, max: poolSize });
    await pool.query(RAW_SCHEMA);
    return {
      async admit(key, limit, windowMs) {
        return (await pool.query<{ ok: boolean }>({ ...admitSql, values: [key, limit, windowMs] })).rows[0]?.ok === true;
      },
      async acquire(key, limit) {
        const r = await pool.query({ ...acquireSql, values: [key, limit] });
        if (r.rowCount !== 1) return null;
        return async () => {
          await pool.query({ ...releaseSql, values: [key] });
        };
      },
      inUse: async (key) => Number((await pool.query<{ used: number }>('SELECT used FROM raw_slots WHERE key = $1', [key])).rows[0]?.used ?? 0),
      close: () => pool.end(),
    };
  },
};
