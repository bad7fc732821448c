import { spawn } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { benchPool, closeAll } from '../pg.js';
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
  Number((await pool.query<{ n: string | null }>('SELECT sum(used) AS n FROM q_quota_slots WHERE key = $1', [key])).rows[0]?.n ?? 0);

/** `q`: the `Quota` client (own holder, concurrent callers of a key batched into one statement). */
export const qQuotaClient: QuotaSystem = {
  name: 'q',
  skip: () => missing(loadQuota),
  async open(dsn, poolSize) {
    const { createQuota } = await need(loadQuota);
    const quota = await createQuota({ dsn, maxConns: poolSize, ttlMs: 60_000 });
    const probe = benchPool(dsn, 1, 'q quota probe');
    return {
      admit: (key, limit, windowMs) => quota.admit(key, limit, windowMs),
      acquire: (key, limit) => quota.acquire(key, limit),
      inUse: (key) => sumSlots(probe, key),
      async close() {
        await closeAll(
          () => quota.close(),
          () => probe.end(),
        );
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
    try {
      await store.registerQuotaHolder(holder, 60_000);
    } catch (err) {
      await store.close().catch(() => undefined);
      throw err;
    }
    const probe = benchPool(dsn, 1, 'q-store quota probe');
    return {
      admit: async (key, limit, windowMs) => (await store.admitQuota(key, 1, limit, windowMs)) === 1,
      async acquire(key, limit) {
        const got = await store.acquireQuotaSlots(holder, key, 1, limit);
        return got === 1 ? () => store.releaseQuotaSlots(holder, [key], [1]) : null;
      },
      inUse: (key) => sumSlots(probe, key),
      async close() {
        await closeAll(
          () => store.close(),
          () => probe.end(),
        );
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
    const pool = benchPool(dsn, poolSize, 'raw-sql quota');
    try {
      await pool.query(RAW_SCHEMA);
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
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

/** What one `quota-client` child reports when its share is done. */
export interface QuotaClientReport {
  /** Admissions per key (admit mode). */
  admitted: Record<string, number>;
  /** Acquire + release pairs completed (acquire mode). */
  pairs: number;
  /** Acquires refused at the limit (and retried). */
  refused: number;
  /** Most slots this process held at once. */
  peak: number;
  /** Seconds this process took for its share. */
  seconds: number;
}

/** Options of {@link runQuotaClients}. */
export interface QuotaClientsOptions {
  dsn: string;
  mode: 'admit' | 'acquire';
  keys: number;
  /** Operations over all processes. */
  n: number;
  procs: number;
  /** Concurrent callers in each process. */
  callers: number;
  /** Slot limit (acquire mode; admit limits are half of each key's calls). */
  limit: number;
}

/** How to start the child script: from TypeScript sources under tsx, or built. */
function childArgs(script: string): string[] {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const ts = import.meta.url.endsWith('.ts');
  const file = path.join(here, '..', 'children', `${script}.${ts ? 'ts' : 'js'}`);
  return ts ? ['--conditions=q-source', '--import', 'tsx', file] : [file];
}

/**
 * Starts `procs` `quota-client` children, waits until each is connected, then starts them all at
 * once and waits for their reports. Returns the reports and the wall-clock seconds from the start
 * signal to the last report. Throws (with the child's stderr) if any child fails.
 */
export async function runQuotaClients(o: QuotaClientsOptions): Promise<{ reports: QuotaClientReport[]; seconds: number }> {
  const children = Array.from({ length: o.procs }, (_, index) => {
    const child = spawn(process.execPath, childArgs('quota-client'), {
      env: {
        ...process.env,
        BENCH_DSN: o.dsn,
        BENCH_MODE: o.mode,
        BENCH_KEYS: String(o.keys),
        BENCH_N: String(o.n),
        BENCH_PROCS: String(o.procs),
        BENCH_INDEX: String(index),
        BENCH_CALLERS: String(o.callers),
        BENCH_LIMIT: String(o.limit),
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let err = '';
    let out = '';
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    const messages: Array<Record<string, unknown>> = [];
    const waiters: Array<() => void> = [];
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      let nl: number;
      while ((nl = out.indexOf('\n')) >= 0) {
        const line = out.slice(0, nl).trim();
        out = out.slice(nl + 1);
        if (line.startsWith('{')) messages.push(JSON.parse(line) as Record<string, unknown>);
        waiters.splice(0).forEach((w) => w());
      }
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.once('exit', () => waiters.splice(0).forEach((w) => w()));
    /** Resolves with the first message having `field`; rejects if the child exits first. */
    const message = async (field: string, timeoutMs: number): Promise<Record<string, unknown>> => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = messages.find((x) => x[field] === true);
        if (m) return m;
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`quota-client ${index} exited (${String(child.exitCode ?? child.signalCode)}) before '${field}': ${err.slice(-1000)}`);
        }
        if (Date.now() > deadline) throw new Error(`quota-client ${index}: no '${field}' within ${timeoutMs} ms: ${err.slice(-1000)}`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 1_000);
        });
      }
    };
    return { child, message, exited };
  });
  try {
    await Promise.all(children.map((c) => c.message('ready', 120_000)));
    const t0 = performance.now();
    for (const c of children) c.child.stdin.write('go\n');
    const reports = (await Promise.all(children.map((c) => c.message('done', 600_000)))) as unknown as QuotaClientReport[];
    const seconds = (performance.now() - t0) / 1000;
    await Promise.all(children.map((c) => c.exited));
    return { reports, seconds };
  } finally {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
  }
}

/** Slots held right now over every key (the run's database is its own), read straight from the table. */
export async function slotsInUse(dsn: string): Promise<number> {
  const pool = benchPool(dsn, 1, 'quota slots check');
  try {
    return Number((await pool.query<{ n: string | null }>('SELECT sum(used) AS n FROM q_quota_slots')).rows[0]?.n ?? 0);
  } finally {
    await pool.end();
  }
}
