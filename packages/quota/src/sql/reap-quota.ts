import type pg from 'pg';
import { statement, withTransaction, type Statement, type StatementScope } from '@q/schema/internal';
import { DB_NOW_MS, type Queryable } from './queryable.js';

// Every step takes the row locks q_quota_acquire / q_quota_admit take, with SKIP LOCKED:
// a key or window in use right now is simply left for the next reap, and the functions re-insert
// a key or window row that a reap deleted between their insert and their lock.

// 1. Lock windows that hold expired admissions (same lock as q_quota_admit)...
const lockExpiredWindows = statement(
  'q_quota_reap_lock_windows',
  `
SELECT w.key, w.window_ms::text AS window_ms FROM __q_schema__.q_quota_windows w
 WHERE EXISTS (SELECT 1 FROM __q_schema__.q_quota_admits a
                WHERE a.key = w.key AND a.window_ms = w.window_ms AND a.at_ms <= ${DB_NOW_MS} - w.window_ms)
 LIMIT $1 FOR UPDATE OF w SKIP LOCKED`,
);

// 2. ...then, under those locks, delete up to $3 expired admissions and subtract them from the
// windows' running counts, so `used` stays the sum of the live admissions.
const expireAdmits = statement(
  'q_quota_reap_admits',
  `
WITH now AS (SELECT ${DB_NOW_MS} AS ms),
picked AS (
  SELECT a.ctid AS id FROM __q_schema__.q_quota_admits a
    JOIN unnest($1::text[], $2::bigint[]) AS w(key, window_ms) ON a.key = w.key AND a.window_ms = w.window_ms
   WHERE a.at_ms <= (SELECT ms FROM now) - a.window_ms
   LIMIT $3
), gone AS (
  DELETE FROM __q_schema__.q_quota_admits a WHERE a.ctid = ANY(ARRAY(SELECT id FROM picked)) RETURNING a.key, a.window_ms, a.n
), sums AS (
  SELECT key, window_ms, sum(n) AS n FROM gone GROUP BY key, window_ms
), windows AS (
  UPDATE __q_schema__.q_quota_windows w SET used = w.used - s.n FROM sums s
   WHERE w.key = s.key AND w.window_ms = s.window_ms RETURNING 1
)
SELECT (SELECT count(*) FROM gone)::int + (SELECT count(*) FROM windows)::int AS n`,
);

// 3. Windows that admit nothing any more. The outer `used = 0` is re-checked on the newest row
// version, so a window an admit just used survives.
const deleteEmptyWindows = statement(
  'q_quota_reap_windows',
  `
WITH gone AS (
  DELETE FROM __q_schema__.q_quota_windows w WHERE (w.key, w.window_ms) IN (
    SELECT e.key, e.window_ms FROM __q_schema__.q_quota_windows e
     WHERE e.used = 0
       AND NOT EXISTS (SELECT 1 FROM __q_schema__.q_quota_admits a WHERE a.key = e.key AND a.window_ms = e.window_ms)
     LIMIT $1 FOR UPDATE SKIP LOCKED)
   AND w.used = 0
  RETURNING 1
)
SELECT count(*)::int AS n FROM gone`,
);

// 4. Slot rows that hold nothing (used = 0, or their holder is gone), under their key's lock.
// The outer condition is re-checked on the newest row version: a slot an acquire just filled
// survives even though the snapshot showed it empty.
const deleteIdleSlots = statement(
  'q_quota_reap_slots',
  `
WITH gone AS (
  DELETE FROM __q_schema__.q_quota_slots s WHERE (s.key, s.holder) IN (
    SELECT z.key, z.holder FROM __q_schema__.q_quota_slots z JOIN __q_schema__.q_quota_keys k ON k.key = z.key
     WHERE z.used = 0 OR NOT EXISTS (SELECT 1 FROM __q_schema__.q_quota_holders h WHERE h.holder = z.holder)
     LIMIT $1 FOR UPDATE OF k SKIP LOCKED)
   AND (s.used = 0 OR NOT EXISTS (SELECT 1 FROM __q_schema__.q_quota_holders h WHERE h.holder = s.holder))
  RETURNING 1
)
SELECT count(*)::int AS n FROM gone`,
);

// 5. Key rows no slot row names.
const deleteUnusedKeys = statement(
  'q_quota_reap_keys',
  `
WITH gone AS (
  DELETE FROM __q_schema__.q_quota_keys k WHERE k.key IN (
    SELECT u.key FROM __q_schema__.q_quota_keys u
     WHERE NOT EXISTS (SELECT 1 FROM __q_schema__.q_quota_slots s WHERE s.key = u.key)
     LIMIT $1 FOR UPDATE SKIP LOCKED)
  RETURNING 1
)
SELECT count(*)::int AS n FROM gone`,
);

/**
 * Deletes up to `limit` rows of each kind that no longer count: expired admissions (keeping the
 * windows' counts exact), empty windows, empty slot rows and keys no slot names. Returns the
 * number of windows updated plus rows deleted.
 */
export async function reapQuota(scope: StatementScope, pool: pg.Pool, limit: number): Promise<number> {
  let changed = await expireAdmissions(scope, pool, limit);
  for (const stmt of [deleteEmptyWindows, deleteIdleSlots, deleteUnusedKeys]) {
    changed += await count(scope, pool, stmt, [limit]);
  }
  return changed;
}

function expireAdmissions(scope: StatementScope, pool: pg.Pool, limit: number): Promise<number> {
  return withTransaction(pool, async (client) => {
    const { rows } = await scope.run<{ key: string; window_ms: string }>(client, lockExpiredWindows, [limit]);
    return rows.length === 0 ? 0 : count(scope, client, expireAdmits, [rows.map((r) => r.key), rows.map((r) => r.window_ms), limit]);
  });
}

async function count(scope: StatementScope, db: Queryable, stmt: Statement, values: unknown[]): Promise<number> {
  const { rows } = await scope.run<{ n: number }>(db, stmt, values);
  return rows[0]?.n ?? 0;
}
