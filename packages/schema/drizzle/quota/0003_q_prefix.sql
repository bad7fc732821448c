-- Every object of the quota module gets the q_ prefix, so q's tables cannot collide with an
-- application's own. Renames keep every holder, slot, window and admission; the functions are
-- dropped and created again under their new names with `SET search_path FROM CURRENT`, so they
-- reach this schema's tables whatever the caller's search_path is.
DROP FUNCTION async_quota_acquire(TEXT, TEXT, INTEGER, INTEGER);
--> statement-breakpoint
DROP FUNCTION async_quota_admit(TEXT, INTEGER, INTEGER, BIGINT);
--> statement-breakpoint
DROP FUNCTION async_quota_renew(TEXT, BIGINT);
--> statement-breakpoint
ALTER TABLE "async_quota_keys" RENAME TO "q_quota_keys";
--> statement-breakpoint
ALTER TABLE "q_quota_keys" RENAME CONSTRAINT "async_quota_keys_pkey" TO "q_quota_keys_pkey";
--> statement-breakpoint
ALTER TABLE "async_quota_holders" RENAME TO "q_quota_holders";
--> statement-breakpoint
ALTER TABLE "q_quota_holders" RENAME CONSTRAINT "async_quota_holders_pkey" TO "q_quota_holders_pkey";
--> statement-breakpoint
ALTER TABLE "async_quota_slots" RENAME TO "q_quota_slots";
--> statement-breakpoint
ALTER TABLE "q_quota_slots" RENAME CONSTRAINT "async_quota_slots_key_holder_pk" TO "q_quota_slots_key_holder_pk";
--> statement-breakpoint
ALTER INDEX "async_quota_slots_holder" RENAME TO "q_quota_slots_holder";
--> statement-breakpoint
ALTER TABLE "async_quota_windows" RENAME TO "q_quota_windows";
--> statement-breakpoint
ALTER TABLE "q_quota_windows" RENAME CONSTRAINT "async_quota_windows_key_window_ms_pk" TO "q_quota_windows_key_window_ms_pk";
--> statement-breakpoint
ALTER TABLE "async_quota_admits" RENAME TO "q_quota_admits";
--> statement-breakpoint
ALTER INDEX "async_quota_admits_key" RENAME TO "q_quota_admits_key";
--> statement-breakpoint
-- Grants up to p_n slots of p_key to a live holder, never more than p_limit in use across live
-- holders. Returns the grant (0..p_n), or -1 when the holder is lapsed, unknown or deleted.
-- Every holder this count takes as lapsed (its own one included) is marked lapsed before the
-- grant commits: slots granted on the strength of a lapse never meet a revived holder.
CREATE OR REPLACE FUNCTION q_quota_acquire(p_key TEXT, p_holder TEXT, p_n INTEGER, p_limit INTEGER)
RETURNS INTEGER LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_now BIGINT;
  v_expires BIGINT;
  v_lapsed BOOLEAN;
  v_used BIGINT;
  v_stale TEXT[];
  v_grant INTEGER;
BEGIN
  -- The key row serialises every acquire on this key across processes. reapQuota may delete an
  -- unused key row between the insert and the lock (the lock then finds nothing): insert again.
  LOOP
    INSERT INTO q_quota_keys(key) VALUES (p_key) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM q_quota_keys WHERE key = p_key FOR UPDATE;
    EXIT WHEN FOUND;
  END LOOP;
  v_now := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
  SELECT expires_ms, lapsed INTO v_expires, v_lapsed FROM q_quota_holders WHERE holder = p_holder;
  IF NOT FOUND OR v_lapsed THEN
    RETURN -1;
  END IF;
  IF v_expires <= v_now THEN
    UPDATE q_quota_holders SET lapsed = true WHERE holder = p_holder;
    RETURN -1;
  END IF;
  SELECT coalesce(sum(s.used) FILTER (WHERE h.expires_ms > v_now AND NOT h.lapsed), 0),
         array_agg(h.holder) FILTER (WHERE h.expires_ms <= v_now AND NOT h.lapsed)
    INTO v_used, v_stale
    FROM q_quota_slots s JOIN q_quota_holders h ON h.holder = s.holder
   WHERE s.key = p_key;
  IF v_stale IS NOT NULL THEN
    -- Marked whatever their rows say by now: this count already left their slots out. Locked in
    -- name order, so acquires on different keys marking the same holders never deadlock.
    PERFORM 1 FROM q_quota_holders WHERE holder = ANY(v_stale) ORDER BY holder FOR UPDATE;
    UPDATE q_quota_holders SET lapsed = true WHERE holder = ANY(v_stale) AND NOT lapsed;
  END IF;
  v_grant := greatest(least(p_n, p_limit - v_used), 0);
  IF v_grant > 0 THEN
    INSERT INTO q_quota_slots(key, holder, used) VALUES (p_key, p_holder, v_grant)
    ON CONFLICT (key, holder) DO UPDATE SET used = q_quota_slots.used + EXCLUDED.used;
  END IF;
  RETURN v_grant;
END
$$;
--> statement-breakpoint
-- Admits up to p_n units of p_key within the trailing window of p_window_ms, never more than
-- p_limit in any window. Each window length keeps its own log.
CREATE OR REPLACE FUNCTION q_quota_admit(p_key TEXT, p_n INTEGER, p_limit INTEGER, p_window_ms BIGINT)
RETURNS INTEGER LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_now BIGINT;
  v_used BIGINT;
  v_expired BIGINT;
  v_grant INTEGER;
BEGIN
  -- The (key, window) row serialises admits per key and window. reapQuota may delete an empty
  -- window row between the insert and the lock (the lock then finds nothing): insert again.
  LOOP
    INSERT INTO q_quota_windows(key, window_ms) VALUES (p_key, p_window_ms) ON CONFLICT DO NOTHING;
    SELECT used INTO v_used FROM q_quota_windows WHERE key = p_key AND window_ms = p_window_ms FOR UPDATE;
    EXIT WHEN FOUND;
  END LOOP;
  v_now := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
  WITH gone AS (
    DELETE FROM q_quota_admits
     WHERE key = p_key AND window_ms = p_window_ms AND at_ms <= v_now - p_window_ms
    RETURNING n
  )
  SELECT coalesce(sum(n), 0) INTO v_expired FROM gone;
  v_used := v_used - v_expired;
  v_grant := greatest(least(p_n, p_limit - v_used), 0);
  IF v_grant > 0 THEN
    INSERT INTO q_quota_admits(key, window_ms, at_ms, n) VALUES (p_key, p_window_ms, v_now, v_grant);
  END IF;
  IF v_grant > 0 OR v_expired > 0 THEN
    UPDATE q_quota_windows SET used = v_used + v_grant WHERE key = p_key AND window_ms = p_window_ms;
  END IF;
  RETURN v_grant;
END
$$;
--> statement-breakpoint
-- Extends a live holder's lease to now + p_ttl_ms; false when it lapsed, is unknown or was deleted
-- (a lapsed holder is never revived: a renewal that finds the lease over marks it lapsed). The
-- holder's key rows are share-locked first, so a renewal never commits after an acquire on one of
-- those keys has already counted the holder as lapsed: either that acquire waits for the renewal,
-- or the renewal finds the holder marked lapsed.
CREATE OR REPLACE FUNCTION q_quota_renew(p_holder TEXT, p_ttl_ms BIGINT)
RETURNS BOOLEAN LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_now BIGINT;
BEGIN
  PERFORM 1 FROM q_quota_keys
   WHERE key IN (SELECT s.key FROM q_quota_slots s WHERE s.holder = p_holder)
   ORDER BY key FOR SHARE;
  v_now := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
  UPDATE q_quota_holders SET expires_ms = v_now + p_ttl_ms
   WHERE holder = p_holder AND NOT lapsed AND expires_ms > v_now;
  IF FOUND THEN
    RETURN true;
  END IF;
  UPDATE q_quota_holders SET lapsed = true WHERE holder = p_holder AND NOT lapsed;
  RETURN false;
END
$$;
