-- q-baseline through 0003_q_prefix
-- Not run on an existing schema: a schema with none of this module's migrations gets this script,
-- the objects migrations 0000…0003_q_prefix leave (pg_dump of them, unqualified), and the journal records
-- those migrations as applied. So a fresh install never creates the old unprefixed names, which
-- could collide with an application's own tables. migrate.test.ts checks it against the steps.
-- Functions come before the tables they read (pg_dump's order): their bodies are checked when
-- first called, as pg_dump's own scripts do.
SET LOCAL check_function_bodies = false;

CREATE FUNCTION q_quota_acquire(p_key text, p_holder text, p_n integer, p_limit integer) RETURNS integer
    LANGUAGE plpgsql
    SET search_path FROM CURRENT
    AS $$
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

CREATE FUNCTION q_quota_admit(p_key text, p_n integer, p_limit integer, p_window_ms bigint) RETURNS integer
    LANGUAGE plpgsql
    SET search_path FROM CURRENT
    AS $$
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

CREATE FUNCTION q_quota_renew(p_holder text, p_ttl_ms bigint) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path FROM CURRENT
    AS $$
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

CREATE TABLE q_quota_admits (
    key text NOT NULL,
    window_ms bigint NOT NULL,
    at_ms bigint NOT NULL,
    n integer NOT NULL
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='10000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='10000', autovacuum_vacuum_cost_delay='0');

CREATE TABLE q_quota_holders (
    holder text NOT NULL,
    expires_ms bigint NOT NULL,
    lapsed boolean DEFAULT false NOT NULL
);

CREATE TABLE q_quota_keys (
    key text NOT NULL
);

CREATE TABLE q_quota_slots (
    key text NOT NULL,
    holder text NOT NULL,
    used integer NOT NULL
)
WITH (fillfactor='70', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='10000', autovacuum_vacuum_cost_delay='0');

CREATE TABLE q_quota_windows (
    key text NOT NULL,
    window_ms bigint NOT NULL,
    used bigint DEFAULT 0 NOT NULL
);

ALTER TABLE ONLY q_quota_holders
    ADD CONSTRAINT q_quota_holders_pkey PRIMARY KEY (holder);

ALTER TABLE ONLY q_quota_keys
    ADD CONSTRAINT q_quota_keys_pkey PRIMARY KEY (key);

ALTER TABLE ONLY q_quota_slots
    ADD CONSTRAINT q_quota_slots_key_holder_pk PRIMARY KEY (key, holder);

ALTER TABLE ONLY q_quota_windows
    ADD CONSTRAINT q_quota_windows_key_window_ms_pk PRIMARY KEY (key, window_ms);

CREATE INDEX q_quota_admits_key ON q_quota_admits USING btree (key, window_ms, at_ms);

CREATE INDEX q_quota_slots_holder ON q_quota_slots USING btree (holder);

SET LOCAL check_function_bodies = true;
