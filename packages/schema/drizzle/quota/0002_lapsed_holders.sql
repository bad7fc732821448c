-- A lapse is recorded in the row by the first statement that sees it (the holder's renewal, an
-- acquire, a reap), so no later clock step — a backward NTP step, a VM restore — can revive it.
ALTER TABLE "async_quota_holders" ADD COLUMN "lapsed" boolean DEFAULT false NOT NULL;
--> statement-breakpoint
UPDATE async_quota_holders SET lapsed = true WHERE expires_ms <= (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
--> statement-breakpoint
-- Grants up to p_n slots of p_key to a live holder, never more than p_limit in use across live
-- holders. Returns the grant (0..p_n), or -1 when the holder is lapsed, unknown or deleted.
-- Every holder this count takes as lapsed (its own one included) is marked lapsed before the
-- grant commits: slots granted on the strength of a lapse never meet a revived holder.
CREATE OR REPLACE FUNCTION async_quota_acquire(p_key TEXT, p_holder TEXT, p_n INTEGER, p_limit INTEGER)
RETURNS INTEGER LANGUAGE plpgsql AS $$
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
    INSERT INTO async_quota_keys(key) VALUES (p_key) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM async_quota_keys WHERE key = p_key FOR UPDATE;
    EXIT WHEN FOUND;
  END LOOP;
  v_now := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
  SELECT expires_ms, lapsed INTO v_expires, v_lapsed FROM async_quota_holders WHERE holder = p_holder;
  IF NOT FOUND OR v_lapsed THEN
    RETURN -1;
  END IF;
  IF v_expires <= v_now THEN
    UPDATE async_quota_holders SET lapsed = true WHERE holder = p_holder;
    RETURN -1;
  END IF;
  SELECT coalesce(sum(s.used) FILTER (WHERE h.expires_ms > v_now AND NOT h.lapsed), 0),
         array_agg(h.holder) FILTER (WHERE h.expires_ms <= v_now AND NOT h.lapsed)
    INTO v_used, v_stale
    FROM async_quota_slots s JOIN async_quota_holders h ON h.holder = s.holder
   WHERE s.key = p_key;
  IF v_stale IS NOT NULL THEN
    -- Marked whatever their rows say by now: this count already left their slots out. Locked in
    -- name order, so acquires on different keys marking the same holders never deadlock.
    PERFORM 1 FROM async_quota_holders WHERE holder = ANY(v_stale) ORDER BY holder FOR UPDATE;
    UPDATE async_quota_holders SET lapsed = true WHERE holder = ANY(v_stale) AND NOT lapsed;
  END IF;
  v_grant := greatest(least(p_n, p_limit - v_used), 0);
  IF v_grant > 0 THEN
    INSERT INTO async_quota_slots(key, holder, used) VALUES (p_key, p_holder, v_grant)
    ON CONFLICT (key, holder) DO UPDATE SET used = async_quota_slots.used + EXCLUDED.used;
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
CREATE OR REPLACE FUNCTION async_quota_renew(p_holder TEXT, p_ttl_ms BIGINT)
RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
  v_now BIGINT;
BEGIN
  PERFORM 1 FROM async_quota_keys
   WHERE key IN (SELECT s.key FROM async_quota_slots s WHERE s.holder = p_holder)
   ORDER BY key FOR SHARE;
  v_now := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
  UPDATE async_quota_holders SET expires_ms = v_now + p_ttl_ms
   WHERE holder = p_holder AND NOT lapsed AND expires_ms > v_now;
  IF FOUND THEN
    RETURN true;
  END IF;
  UPDATE async_quota_holders SET lapsed = true WHERE holder = p_holder AND NOT lapsed;
  RETURN false;
END
$$;
