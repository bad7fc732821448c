import type pg from 'pg';
import { withTransaction } from '@q/schema';
import { DB_NOW_MS, type Queryable } from './queryable.js';

// Every step takes the row locks async_quota_acquire / async_quota_admit take, with SKIP LOCKED:
// a key or window in use right now is simply left for the next reap, and the functions re-insert
// a key or window row that a reap deleted between their insert and their lock.

// 1. Lock windows that hold expired admissions (same lock as async_quota_admit)...
const lockExpiredWindows = `
SELECT w.key, w.window_ms::text AS window_ms FROM async_quota_windows w
 WHERE EXISTS (SELECT 1 FROM async_quota_admits a
                WHERE a.key = w.key AND a.window_ms = w.window_ms AND a.at_ms <= ${DB_NOW_MS} - w.window_ms)
 LIMIT $1 FOR UPDATE OF w SKIP LOCKED`;

// 2. ...then, under those locks, delete up to $3 expired admissions and subtract them from the
// windows' running counts, so `used` stays the sum of the live admissions.
const expireAdmits = `
WITH now AS (SELECT ${DB_NOW_MS} AS ms),
picked AS (
  SELECT a.ctid AS id FROM async_quota_admits a
    JOIN unnest($1::text[], $2::bigint[]) AS w(key, window_ms) ON a.key = w.key AND a.window_ms = w.window_ms
   WHERE a.at_ms <= (SELECT ms FROM now) - a.window_ms
   LIMIT $3
), gone AS (
  DELETE FROM async_quota_admits a WHERE a.ctid = ANY(ARRAY(SELECT id FROM picked)) RETURNING a.key, a.window_ms, a.n
), sums AS (
  SELECT key, window_ms, sum(n) AS n FROM gone GROUP BY key, window_ms
), windows AS (
  UPDATE async_quota_windows w SET used = w.used - s.n FROM sums s
   WHERE w.key = s.key AND w.window_ms = s.window_ms RETURNING 1
)
SELECT (SELECT count(*) FROM gone)::int + (SELECT count(*) FROM windows)::int AS n`;

// 3. Windows that admit nothing any more. The outer `used = 0` is re-checked on the newest row
// version, so a window an admit just used survives.
const deleteEmptyWindows = `
WITH gone AS (
  DELETE FROM async_quota_windows w WHERE (w.key, w.window_ms) IN (
    SELECT e.key, e.window_ms FROM async_quota_windows e
     WHERE e.used = 0
       AND NOT EXISTS (SELECT 1 FROM async_quota_admits a WHERE a.key = e.key AND a.window_ms = e.window_ms)
     LIMIT $1 FOR UPDATE SKIP LOCKED)
   AND w.used = 0
  RETURNING 1
)
SELECT count(*)::int AS n FROM gone`;

// 4. Slot rows that hold nothing (used = 0, or their holder is gone), under their key's lock.
// The outer condition is re-checked on the newest row version: a slot an acquire just filled
// survives even though the snapshot showed it empty.
const deleteIdleSlots = `
WITH gone AS (
  DELETE FROM async_quota_slots s WHERE (s.key, s.holder) IN (
    SELECT z.key, z.holder FROM async_quota_slots z JOIN async_quota_keys k ON k.key = z.key
     WHERE z.used = 0 OR NOT EXISTS (SELECT 1 FROM async_quota_holders h WHERE h.holder = z.holder)
     LIMIT $1 FOR UPDATE OF k SKIP LOCKED)
   AND (s.used = 0 OR NOT EXISTS (SELECT 1 FROM async_quota_holders h WHERE h.holder = s.holder))
  RETURNING 1
)
SELECT count(*)::int AS n FROM gone`;

// 5. Key rows no slot row names.
const deleteUnusedKeys = `
WITH gone AS (
  DELETE FROM async_quota_keys k WHERE k.key IN (
    SELECT u.key FROM async_quota_keys u
     WHERE NOT EXISTS (SELECT 1 FROM async_quota_slots s WHERE s.key = u.key)
     LIMIT $1 FOR UPDATE SKIP LOCKED)
  RETURNING 1
)
SELECT count(*)::int AS n FROM gone`;

/**
 * Deletes up to `limit` rows of each kind that no longer count: expired admissions (keeping the
 * windows' counts exact), empty windows, empty slot rows and keys no slot names. Returns the
 * number of windows updated plus rows deleted.
 */
export async function reapQuota(pool: pg.Pool, limit: number): Promise<number> {
  let changed = await expireAdmissions(pool, limit);
  for (const [name, text] of [
    ['q_quota_reap_windows', deleteEmptyWindows],
    ['q_quota_reap_slots', deleteIdleSlots],
    ['q_quota_reap_keys', deleteUnusedKeys],
  ] as const) {
    changed += await count(pool, name, text, [limit]);
  }
  return changed;
}

function expireAdmissions(pool: pg.Pool, limit: number): Promise<number> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ key: string; window_ms: string }>({
      name: 'q_quota_reap_lock_windows',
      text: lockExpiredWindows,
      values: [limit],
    });
    return rows.length === 0
      ? 0
      : count(client, 'q_quota_reap_admits', expireAdmits, [rows.map((r) => r.key), rows.map((r) => r.window_ms), limit]);
  });
}

async function count(db: Queryable, name: string, text: string, values: unknown[]): Promise<number> {
  const { rows } = await db.query<{ n: number }>({ name, text, values });
  return rows[0]?.n ?? 0;
}
