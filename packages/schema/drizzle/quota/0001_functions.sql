-- Admission logs and slot rows churn like queue tables.
ALTER TABLE "async_quota_admits" SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000, autovacuum_vacuum_cost_delay = 0);
--> statement-breakpoint
ALTER TABLE "async_quota_slots" SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_cost_delay = 0);
--> statement-breakpoint
-- Grants up to p_n slots of p_key to a live holder, never more than p_limit in use across live
-- holders. Returns the grant (0..p_n), or -1 when the holder is lapsed, unknown or deleted.
CREATE OR REPLACE FUNCTION async_quota_acquire(p_key TEXT, p_holder TEXT, p_n INTEGER, p_limit INTEGER)
RETURNS INTEGER LANGUAGE plpgsql AS $$
DECLARE
  v_now BIGINT;
  v_used BIGINT;
  v_grant INTEGER;
BEGIN
  -- The key row serialises every acquire on this key across processes. reapQuota may delete an
  -- unused key row between the insert and the lock (the lock then finds nothing): insert again.
  LOOP
    INSERT INTO async_quota_keys(key) VALUES (p_key) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM async_quota_keys WHERE key = p_key FOR UPDATE;
    EXIT WHEN FOUND;
  END LOOP;
  v_now := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
  IF NOT EXISTS (SELECT 1 FROM async_quota_holders WHERE holder = p_holder AND expires_ms > v_now) THEN
    RETURN -1;
  END IF;
  SELECT coalesce(sum(s.used), 0) INTO v_used
    FROM async_quota_slots s JOIN async_quota_holders h ON h.holder = s.holder
   WHERE s.key = p_key AND h.expires_ms > v_now;
  v_grant := greatest(least(p_n, p_limit - v_used), 0);
  IF v_grant > 0 THEN
    INSERT INTO async_quota_slots(key, holder, used) VALUES (p_key, p_holder, v_grant)
    ON CONFLICT (key, holder) DO UPDATE SET used = async_quota_slots.used + EXCLUDED.used;
  END IF;
  RETURN v_grant;
END
$$;
--> statement-breakpoint
-- Admits up to p_n units of p_key within the trailing window of p_window_ms, never more than
-- p_limit in any window. Each window length keeps its own log.
CREATE OR REPLACE FUNCTION async_quota_admit(p_key TEXT, p_n INTEGER, p_limit INTEGER, p_window_ms BIGINT)
RETURNS INTEGER LANGUAGE plpgsql AS $$
DECLARE
  v_now BIGINT;
  v_used BIGINT;
  v_expired BIGINT;
  v_grant INTEGER;
BEGIN
  -- The (key, window) row serialises admits per key and window. reapQuota may delete an empty
  -- window row between the insert and the lock (the lock then finds nothing): insert again.
  LOOP
    INSERT INTO async_quota_windows(key, window_ms) VALUES (p_key, p_window_ms) ON CONFLICT DO NOTHING;
    SELECT used INTO v_used FROM async_quota_windows WHERE key = p_key AND window_ms = p_window_ms FOR UPDATE;
    EXIT WHEN FOUND;
  END LOOP;
  v_now := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
  WITH gone AS (
    DELETE FROM async_quota_admits
     WHERE key = p_key AND window_ms = p_window_ms AND at_ms <= v_now - p_window_ms
    RETURNING n
  )
  SELECT coalesce(sum(n), 0) INTO v_expired FROM gone;
  v_used := v_used - v_expired;
  v_grant := greatest(least(p_n, p_limit - v_used), 0);
  IF v_grant > 0 THEN
    INSERT INTO async_quota_admits(key, window_ms, at_ms, n) VALUES (p_key, p_window_ms, v_now, v_grant);
  END IF;
  IF v_grant > 0 OR v_expired > 0 THEN
    UPDATE async_quota_windows SET used = v_used + v_grant WHERE key = p_key AND window_ms = p_window_ms;
  END IF;
  RETURN v_grant;
END
$$;
--> statement-breakpoint
-- Extends a live holder's lease to now + p_ttl_ms; false when it lapsed, is unknown or was deleted
-- (a lapsed holder is never revived). The holder's key rows are share-locked first, so a renewal
-- never commits after an acquire on one of those keys has already counted the holder as lapsed:
-- either that acquire waits for the renewal, or the renewal reads the clock after it.
CREATE OR REPLACE FUNCTION async_quota_renew(p_holder TEXT, p_ttl_ms BIGINT)
RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
  v_now BIGINT;
BEGIN
  PERFORM 1 FROM async_quota_keys
   WHERE key IN (SELECT s.key FROM async_quota_slots s WHERE s.holder = p_holder)
   ORDER BY key FOR SHARE;
  v_now := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
  UPDATE async_quota_holders SET expires_ms = v_now + p_ttl_ms WHERE holder = p_holder AND expires_ms > v_now;
  RETURN FOUND;
END
$$;
