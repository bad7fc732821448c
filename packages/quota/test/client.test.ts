import { createTestSchema, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQuota, type Quota, type QuotaOptions, type Release } from '../src/index.js';
import { lapseHolder, liveSlots, sleep, waitFor } from './helpers.js';

let schema: TestSchema;
let pool: pg.Pool;
// Every test file shares the server: only ever look at (and cut) this file's own connections.
const APP = `qclient-${process.pid}-${Math.random().toString(16).slice(2, 10)}`;
const statements: string[] = [];

beforeAll(async () => {
  schema = await createTestSchema('qclient');
  pool = new pg.Pool({ connectionString: schema.dsn, max: 8, application_name: APP });
  pool.on('error', () => undefined); // tests terminate backends on purpose
  // Count what the clients send: pg's Pool.query is the one door every quota statement uses.
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const c = args[0];
    statements.push(typeof c === 'string' ? c : ((c as { text?: string }).text ?? ''));
    return query(...args);
  };
});
afterAll(async () => {
  await pool?.end();
  await schema?.drop();
});

const count = (fn: string) => statements.filter((s) => s.includes(fn)).length;

async function holderRows(): Promise<string[]> {
  const { rows } = await pool.query<{ holder: string }>(`SELECT holder FROM q_quota_holders ORDER BY holder`);
  return rows.map((r) => r.holder);
}

/** Holds the key row of `key` locked, so acquires on it wait until `unlock()`. */
async function lockKey(key: string): Promise<{ pid: number; unlock: () => Promise<void> }> {
  const c = new pg.Client({ connectionString: schema.dsn });
  await c.connect();
  await c.query(`INSERT INTO q_quota_keys(key) VALUES ($1) ON CONFLICT DO NOTHING`, [key]);
  await c.query('BEGIN');
  await c.query(`SELECT 1 FROM q_quota_keys WHERE key = $1 FOR UPDATE`, [key]);
  const { rows } = await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return { pid: rows[0]!.pid, unlock: async () => void (await c.query('COMMIT').finally(() => c.end())) };
}

/** Waits until one of our backends waits on a lock running a statement `LIKE queryLike` (default: our acquire reached the key row). */
async function waitForLockWait(queryLike = '%q_quota_acquire%', what = 'an acquire waiting on the key lock'): Promise<void> {
  await waitFor(
    async () => {
      const { rows } = await pool.query(
        `SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE $2`,
        [APP, queryLike],
      );
      return rows.length > 0;
    },
    20_000,
    what,
  );
}

describe('Quota client', () => {
  let quota: Quota;
  beforeAll(async () => {
    quota = await createQuota({ pool, ttlMs: 3_000 });
  });
  afterAll(async () => {
    await quota?.close();
  });

  it('100 concurrent acquires with limit 7: exactly 7 granted, in far fewer statements than callers', async () => {
    const before = count('q_quota_acquire');
    const results = await Promise.all(Array.from({ length: 100 }, () => quota.acquire('tenant:burst', 7)));
    const granted = results.filter((r): r is Release => r !== null);
    expect(granted).toHaveLength(7);
    expect(await liveSlots(pool, 'tenant:burst')).toBe(7);
    const sent = count('q_quota_acquire') - before;
    expect(sent).toBeGreaterThanOrEqual(1);
    expect(sent).toBeLessThanOrEqual(5);
    await Promise.all(granted.map((r) => r()));
    await granted[0]!(); // a release is idempotent
    expect(await liveSlots(pool, 'tenant:burst')).toBe(0);
  });

  it('100 callers taking turns never have more than 7 in use, and batch their statements', async () => {
    const before = count('q_quota_acquire');
    let attempts = 0;
    let inUse = 0;
    let peak = 0;
    let done = 0;
    await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        for (let tries = 0; tries < 400; tries++) {
          attempts += 1;
          const release = await quota.acquire('tenant:turns', 7);
          if (!release) {
            await sleep(5 + (i % 7));
            continue;
          }
          inUse += 1;
          peak = Math.max(peak, inUse);
          await sleep(2);
          inUse -= 1;
          await release();
          done += 1;
          return;
        }
      }),
    );
    expect(done).toBe(100);
    expect(peak).toBeLessThanOrEqual(7);
    expect(peak).toBeGreaterThan(1);
    const sent = count('q_quota_acquire') - before;
    expect(sent).toBeLessThan(attempts / 2);
    await waitFor(async () => (await liveSlots(pool, 'tenant:turns')) === 0, 10_000, 'all slots released');
  });

  it('admit: 50 concurrent callers with a limit of 10 get exactly 10 admissions', async () => {
    const before = count('q_quota_admit');
    const results = await Promise.all(Array.from({ length: 50 }, () => quota.admit('api:outbound', 10, 60_000)));
    expect(results.filter(Boolean)).toHaveLength(10);
    expect(count('q_quota_admit') - before).toBeLessThanOrEqual(5);
    expect(await quota.admit('api:outbound', 10, 60_000)).toBe(false);
    expect(await quota.admit('api:outbound', 11, 60_000)).toBe(true); // a higher limit sees the same count
  });

  it('a caller that gives up while its statement runs has its grant released', async () => {
    const key = 'tenant:abort';
    const lock = await lockKey(key);
    const ac = new AbortController();
    const waiting = quota.acquire(key, 3, ac.signal);
    const other = quota.acquire(key, 3);
    waiting.catch(() => undefined); // asserted below
    await waitForLockWait();
    ac.abort(new Error('caller gave up'));
    await expect(waiting).rejects.toThrow('caller gave up');
    await lock.unlock();
    const release = await other;
    expect(release).not.toBeNull();
    // Only the caller still waiting keeps a slot; the given-up grant is released.
    await waitFor(async () => (await liveSlots(pool, key)) === 1, 10_000, 'the abandoned grant released');
    await release!();
    expect(await liveSlots(pool, key)).toBe(0);
    // An already aborted signal never sends anything.
    await expect(quota.acquire(key, 3, AbortSignal.abort(new Error('no')))).rejects.toThrow('no');
  });

  it('registers a fresh holder after a lapse and keeps counting the old one’s grants until released', async () => {
    const key = 'tenant:lapse';
    const first = await quota.acquire(key, 5);
    expect(first).not.toBeNull();
    const [old] = quota.holders;
    await lapseHolder(pool, old!);
    const second = await quota.acquire(key, 5);
    expect(second).not.toBeNull();
    const current = quota.holders.filter((h) => h !== old);
    expect(current).toHaveLength(1);
    await first!();
    await second!();
    // The lapsed holder is deleted once nothing it holds is outstanding.
    await waitFor(async () => !(await holderRows()).includes(old!), 10_000, 'the lapsed holder deleted');
    // The client forgets a holder once its delete has returned, a moment after the row is gone.
    await waitFor(async () => !quota.holders.includes(old!), 10_000, 'the lapsed holder forgotten');
    expect(quota.holders).toEqual(current);
  });

  it('retires its holder on any error, deletes it, and serves the next caller with a fresh one', async () => {
    const key = 'tenant:error';
    const [before] = quota.holders;
    const lock = await lockKey(key);
    const failing = quota.acquire(key, 2);
    failing.catch(() => undefined); // asserted below; never unhandled if an earlier step fails
    await waitForLockWait();
    // Cut the connection of the waiting acquire: its caller gets an error, never a guess.
    await pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE '%q_quota_acquire%'`,
      [APP],
    );
    await expect(failing).rejects.toMatchObject({ code: 'CONNECTION' });
    await lock.unlock();
    const release = await quota.acquire(key, 2);
    expect(release).not.toBeNull();
    // The retired holder is deleted in the background once nothing it granted is outstanding.
    await waitFor(async () => !(await holderRows()).includes(before!), 10_000, 'the retired holder deleted');
    await waitFor(async () => !quota.holders.includes(before!), 10_000, 'the retired holder forgotten');
    expect(quota.holders).toHaveLength(1);
    await release!();
  });

  it('a failed release is not retried: the holder is retired and deleted, freeing its slots once', async () => {
    const key = 'tenant:release-fail';
    const a = await quota.acquire(key, 4);
    const b = await quota.acquire(key, 4);
    const [h] = quota.holders;
    // Block the release on the slot row, then cut it.
    const c = new pg.Client({ connectionString: schema.dsn });
    await c.connect();
    await c.query('BEGIN');
    await c.query(`SELECT 1 FROM q_quota_slots WHERE key = $1 AND holder = $2 FOR UPDATE`, [key, h]);
    const releasing = a!();
    await waitForLockWait('%q_quota_slots s SET used%', 'a release waiting');
    const sentBefore = count('SET used = greatest');
    await pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE '%q_quota_slots s SET used%'`,
      [APP],
    );
    await releasing; // resolves: the holder is retired instead
    await c.query('COMMIT');
    await c.end();
    expect(count('SET used = greatest')).toBe(sentBefore);
    // The other grant still counts until it is released; then the holder is deleted.
    expect(await liveSlots(pool, key)).toBe(2);
    expect(await quota.acquire(key, 4)).not.toBeNull(); // a fresh holder
    await b!();
    await waitFor(async () => !(await holderRows()).includes(h!), 10_000, 'the retired holder deleted');
    expect(await liveSlots(pool, key)).toBe(1);
  });

  it('rejects bad arguments with INVALID_ARGUMENT', async () => {
    await expect(quota.acquire('', 1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(quota.acquire('k', -1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(quota.acquire('k', 2.5)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(quota.admit('k', 1, 0)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(quota.admit('k', 1, -10)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(quota.admit('', 1, 10)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(createQuota({ pool, ttlMs: 0 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(createQuota({ ttlMs: 1000 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(createQuota({ dsn: 'mysql://x', ttlMs: 1000 })).rejects.toMatchObject({ code: 'UNSUPPORTED_DSN' });
  });

  it('a signal that is not an AbortSignal is INVALID_ARGUMENT, not a TypeError', async () => {
    for (const signal of ['not a signal', {}, 42, null, { aborted: false }]) {
      const acquire = await quota.acquire('k', 1, signal as unknown as AbortSignal).catch((e: unknown) => e);
      expect(acquire, String(signal)).toMatchObject({ code: 'INVALID_ARGUMENT', message: 'acquire: signal must be an AbortSignal or absent' });
      const admit = await quota.admit('k', 1, 1000, signal as unknown as AbortSignal).catch((e: unknown) => e);
      expect(admit, String(signal)).toMatchObject({ code: 'INVALID_ARGUMENT', message: 'admit: signal must be an AbortSignal or absent' });
    }
    expect(await liveSlots(pool, 'k')).toBe(0);
  });
});

describe('createQuota with a bad option', () => {
  // Each refusal must come before anything opens: no schema migrated, no connection left.
  const app = `qbadopt-${process.pid}`;
  const connections = async () =>
    (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`, [app])).rows[0]!.n;
  const schemaExists = async (name: string) =>
    (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1`, [name])).rows[0]!.n > 0;

  it('is refused with INVALID_ARGUMENT (or UNSUPPORTED_DSN) before it migrates or opens a pool', async () => {
    const fresh = `qbadopt_${Math.random().toString(16).slice(2, 10)}`;
    const bad: Array<Partial<QuotaOptions>> = [
      { maxPersistentFailures: 0 },
      { maxPersistentFailures: 1.5 },
      { onError: 'log it' as unknown as QuotaOptions['onError'] },
      { logger: {} as QuotaOptions['logger'] },
      { logger: { info: () => undefined } as unknown as QuotaOptions['logger'] },
      { migrate: 'no' as unknown as boolean },
      { maxConns: Number.NaN },
      { idleTimeoutMillis: -1 },
      { pooler: 'session' as 'transaction' },
      { listenDsn: 'postgres://u:a@b/c@h/db' },
      { applicationName: 'nul\u0000' },
      { tracerProvider: {} as QuotaOptions['tracerProvider'] },
      { meterProvider: 'meter' as unknown as QuotaOptions['meterProvider'] },
    ];
    for (const over of bad) {
      const err = await createQuota({ dsn: schema.dsn, schema: fresh, applicationName: app, ttlMs: 1_000, ...over }).then(
        async (q) => {
          await q.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(err, JSON.stringify(over)).toMatchObject({ code: expect.stringMatching(/^(INVALID_ARGUMENT|UNSUPPORTED_DSN)$/) });
      expect(await schemaExists(fresh), JSON.stringify(over)).toBe(false);
      expect(await connections(), JSON.stringify(over)).toBe(0);
    }
    // On a pool of the application's: nothing migrated either.
    const err = await createQuota({ pool, schema: fresh, maxPersistentFailures: 0 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(await schemaExists(fresh)).toBe(false);
  });
});

describe('Quota client lifecycle', () => {
  it('renews its holder every ttl/3, reaps, and close() deletes its holders and refuses new calls', async () => {
    const quota = await createQuota({ dsn: schema.dsn, ttlMs: 1_000, reapIntervalMs: 200, maxConns: 3 });
    const release = await quota.acquire('tenant:life', 1);
    expect(release).not.toBeNull();
    const [h] = quota.holders;
    // Several TTLs later the holder is still live (renewed), so its slot still counts.
    await sleep(3_000);
    expect(await liveSlots(pool, 'tenant:life')).toBe(1);
    expect(await quota.acquire('tenant:life', 1)).toBeNull();
    await release!();
    await quota.close();
    await quota.close();
    expect(await holderRows()).not.toContain(h);
    await expect(quota.acquire('tenant:life', 1)).rejects.toMatchObject({ code: 'CLOSED' });
    await expect(quota.admit('tenant:life', 1, 1000)).rejects.toMatchObject({ code: 'CLOSED' });
  });
});

describe('Quota client TTL and timer ranges', () => {
  // A client created by mistake is closed at once: its timers must not outlive the check.
  const refusal = (opts: QuotaOptions) =>
    createQuota(opts).then(
      async (q) => void (await q.close()),
      (err: unknown) => err,
    );

  it('rejects a ttlMs below 1 s with INVALID_ARGUMENT', async () => {
    for (const ttlMs of [1, 100, 500, 999, 999.5]) {
      const err = await refusal({ pool, ttlMs, migrate: false });
      expect(err, `ttlMs ${ttlMs}`).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect((err as Error).message).toContain('ttlMs');
    }
  });

  it('rejects a ttlMs or reapIntervalMs past the longest Node timer with INVALID_ARGUMENT', async () => {
    for (const ttlMs of [2 ** 31, 3 * 2 ** 31, Number.MAX_SAFE_INTEGER]) {
      const err = await refusal({ pool, ttlMs, migrate: false });
      expect(err, `ttlMs ${ttlMs}`).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect((err as Error).message).toContain('ttlMs');
    }
    for (const reapIntervalMs of [0, 2 ** 31, 3 * 2 ** 31]) {
      const err = await refusal({ pool, reapIntervalMs, migrate: false });
      expect(err, `reapIntervalMs ${reapIntervalMs}`).toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
  });

  it('the largest ttlMs and reapIntervalMs are accepted and their timers do not fire early', async () => {
    const quota = await createQuota({ pool, ttlMs: 2 ** 31 - 1, reapIntervalMs: 2 ** 31 - 1, migrate: false });
    try {
      expect(await quota.acquire('tenant:long-ttl', 1)).not.toBeNull();
      const before = statements.length;
      await sleep(300);
      // An overflowing timer would fire every 1 ms: hundreds of renewals by now.
      expect(statements.slice(before)).toEqual([]);
    } finally {
      await quota.close();
    }
  });

  it('4 clients at the smallest TTL, holding slots for several TTLs, never have more than the limit in use together', async () => {
    const LIMIT = 5;
    const TTL = 1_000;
    const key = 'tenant:short-ttl';
    const clients = await Promise.all(Array.from({ length: 4 }, () => createQuota({ dsn: schema.dsn, ttlMs: TTL, maxConns: 2 })));
    let inUse = 0;
    let peak = 0;
    let grants = 0;
    const until = performance.now() + 5_000;
    try {
      await Promise.all(
        clients.flatMap((quota, c) =>
          Array.from({ length: 3 }, async (_, w) => {
            while (performance.now() < until) {
              const release = await quota.acquire(key, LIMIT);
              if (!release) {
                await sleep(10 + ((c + w) % 5));
                continue;
              }
              inUse += 1;
              peak = Math.max(peak, inUse);
              grants += 1;
              // Held for up to 2.5 TTLs: only the renewals keep these slots counted.
              await sleep(200 + ((grants * 397) % 2_300));
              inUse -= 1;
              await release();
            }
          }),
        ),
      );
    } finally {
      await Promise.all(clients.map((q) => q.close()));
    }
    expect(peak).toBeLessThanOrEqual(LIMIT);
    expect(peak).toBe(LIMIT); // the test really contended
    expect(grants).toBeGreaterThan(LIMIT);
  });
});

describe('Quota client close', () => {
  it('close() refuses acquires whose statement is in flight with CLOSED, and their slots go to others at once', async () => {
    const key = 'tenant:closing';
    const a = await createQuota({ pool, ttlMs: 3_000, migrate: false });
    const lock = await lockKey(key);
    const inFlight = Array.from({ length: 3 }, () => a.acquire(key, 3));
    for (const p of inFlight) p.catch(() => undefined); // asserted below
    await waitForLockWait();
    const closing = a.close();
    await lock.unlock();
    await closing;
    for (const p of inFlight) await expect(p).rejects.toMatchObject({ code: 'CLOSED' });
    expect(await liveSlots(pool, key)).toBe(0);
    // Nobody holds them: another client gets all three.
    const b = await createQuota({ pool, ttlMs: 3_000, migrate: false });
    try {
      const got = await Promise.all(Array.from({ length: 3 }, () => b.acquire(key, 3)));
      expect(got.every((r) => r !== null)).toBe(true);
      expect(await liveSlots(pool, key)).toBe(3);
      await Promise.all(got.map((r) => r!()));
    } finally {
      await b.close();
    }
  });
});
