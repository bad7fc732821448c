-- Every object of the request queue gets the q_ prefix, so q's tables cannot collide with an
-- application's own. Renames keep every row, sequence value and index; the functions are dropped
-- and created again under their new names with `SET search_path FROM CURRENT`, so they reach
-- this schema's tables whatever the caller's search_path is.
DROP FUNCTION async_dispatch(TEXT, TEXT, BIGINT, INTEGER);
--> statement-breakpoint
DROP FUNCTION async_ack(TEXT, TEXT[], TEXT[], BIGINT[], TEXT[], TEXT[], BIGINT[], INTEGER[], BIGINT);
--> statement-breakpoint
DROP FUNCTION async_in_flight(TEXT, TEXT);
--> statement-breakpoint
DROP FUNCTION async_reset_stale(TEXT, TEXT, INTEGER[]);
--> statement-breakpoint
DROP FUNCTION async_undispatch(TEXT, TEXT[], TEXT[], BIGINT[], BIGINT);
--> statement-breakpoint
DROP FUNCTION async_cancelled_keys(TEXT[], TEXT[]);
--> statement-breakpoint
DROP FUNCTION async_pop_results(TEXT, BIGINT, INTEGER);
--> statement-breakpoint
DROP FUNCTION async_retry(TEXT, TEXT, TEXT, BIGINT, BIGINT, TEXT);
--> statement-breakpoint
ALTER TABLE "async_requests" RENAME TO "q_requests";
--> statement-breakpoint
ALTER TABLE "q_requests" RENAME CONSTRAINT "async_requests_id_request_token_pk" TO "q_requests_id_request_token_pk";
--> statement-breakpoint
ALTER INDEX "async_requests_pending" RENAME TO "q_requests_pending";
--> statement-breakpoint
ALTER INDEX "async_requests_inflight" RENAME TO "q_requests_inflight";
--> statement-breakpoint
ALTER TABLE "async_results" RENAME TO "q_results";
--> statement-breakpoint
ALTER TABLE "q_results" RENAME CONSTRAINT "async_results_pkey" TO "q_results_pkey";
--> statement-breakpoint
ALTER SEQUENCE "async_results_seq_seq" RENAME TO "q_results_seq_seq";
--> statement-breakpoint
ALTER INDEX "async_results_route_seq" RENAME TO "q_results_route_seq";
--> statement-breakpoint
ALTER INDEX "async_results_expiry" RENAME TO "q_results_expiry";
--> statement-breakpoint
ALTER INDEX "async_results_expires_at" RENAME TO "q_results_expires_at";
--> statement-breakpoint
ALTER TABLE "async_partitions" RENAME TO "q_partitions";
--> statement-breakpoint
ALTER TABLE "q_partitions" RENAME CONSTRAINT "async_partitions_queue_partition_id_pk" TO "q_partitions_queue_partition_id_pk";
--> statement-breakpoint
ALTER TABLE "async_dispatchers" RENAME TO "q_dispatchers";
--> statement-breakpoint
ALTER TABLE "q_dispatchers" RENAME CONSTRAINT "async_dispatchers_queue_owner_pk" TO "q_dispatchers_queue_owner_pk";
--> statement-breakpoint
ALTER SEQUENCE "async_dispatch_attempts" RENAME TO "q_dispatch_attempts";
--> statement-breakpoint
-- q_dispatch: stamps up to p_limit pending, due rows of the partitions p_owner holds and is
-- not draining with the partition's epoch and a fresh attempt; earliest deadline first, then
-- submission order. Rows locked by a concurrent dispatcher are skipped, never waited for.
CREATE OR REPLACE FUNCTION q_dispatch(p_owner TEXT, p_queue TEXT, p_now BIGINT, p_limit INTEGER)
RETURNS SETOF q_requests LANGUAGE sql
SET enable_seqscan = off SET enable_bitmapscan = off SET search_path FROM CURRENT
AS $$
  WITH picked AS MATERIALIZED (
    SELECT r.ctid AS rid
      FROM q_requests r
     WHERE r.queue = p_queue AND r.dispatch_epoch = 0 AND r.not_before <= p_now
       AND r.partition_id = ANY (ARRAY(
             SELECT p.partition_id FROM q_partitions p
              WHERE p.queue = p_queue AND p.owner = p_owner AND p.draining = 0))
     ORDER BY r.deadline, r.created_at
     LIMIT p_limit
       FOR UPDATE OF r SKIP LOCKED
  )
  UPDATE q_requests r
     SET dispatch_epoch = p.epoch, dispatch_attempt = nextval('q_dispatch_attempts')
    FROM q_partitions p
   WHERE r.ctid = ANY (ARRAY(SELECT rid FROM picked))
     AND p.queue = r.queue AND p.partition_id = r.partition_id AND p.owner = p_owner AND p.draining = 0
  RETURNING r.*
$$;
--> statement-breakpoint
-- q_ack: deletes each request still in flight under the given attempt in a partition p_owner
-- holds at the row's epoch, and records its result, in one call. Returns the acked keys.
-- Input keys must be distinct (the client dedupes); p_ords carries each key's input position so
-- results of one batch get their seq in input order. One primary-key delete per key: a row a
-- concurrent transaction changed meanwhile is re-checked in its new version (a set-based delete
-- by ctid would miss it). dispatch_epoch <> 0 rather than > 0: the same test, since epochs are
-- never negative, without making the in-flight index usable for a full scan.
CREATE OR REPLACE FUNCTION q_ack(p_owner TEXT, p_ids TEXT[], p_tokens TEXT[], p_attempts BIGINT[],
  p_routes TEXT[], p_payloads TEXT[], p_expires BIGINT[], p_ords INTEGER[], p_now_ms BIGINT)
RETURNS TABLE (acked_id TEXT, acked_token TEXT) LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET search_path FROM CURRENT
AS $$
DECLARE
  v RECORD;
  v_hit INTEGER[] := '{}';
BEGIN
  FOR v IN SELECT i.n, i.id, i.request_token, i.attempt
             FROM unnest(p_ids, p_tokens, p_attempts) WITH ORDINALITY AS i(id, request_token, attempt, n)
            ORDER BY i.id, i.request_token
  LOOP
    DELETE FROM q_requests r
     USING q_partitions p
     WHERE r.id = v.id AND r.request_token = v.request_token
       AND r.dispatch_epoch <> 0 AND r.dispatch_attempt = v.attempt
       AND p.queue = r.queue AND p.partition_id = r.partition_id
       AND p.owner = p_owner AND p.epoch = r.dispatch_epoch;
    IF FOUND THEN
      v_hit := v_hit || v.n::INTEGER;
    END IF;
  END LOOP;
  INSERT INTO q_results (route, id, request_token, payload, expires_at, created_at)
  SELECT p_routes[h], p_ids[h], p_tokens[h], p_payloads[h], p_expires[h], p_now_ms
    FROM unnest(v_hit) AS h
   ORDER BY p_ords[h];
  RETURN QUERY SELECT p_ids[h], p_tokens[h] FROM unnest(v_hit) AS h;
END
$$;
--> statement-breakpoint
-- q_in_flight: current-epoch stamps of p_owner's partitions (stale-epoch rows excluded).
CREATE OR REPLACE FUNCTION q_in_flight(p_owner TEXT, p_queue TEXT)
RETURNS TABLE (stamp_id TEXT, stamp_token TEXT, stamp_attempt BIGINT) LANGUAGE sql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off SET search_path FROM CURRENT
AS $$
  SELECT r.id, r.request_token, r.dispatch_attempt
    FROM q_requests r
    JOIN q_partitions p ON p.queue = r.queue AND p.partition_id = r.partition_id
   WHERE r.queue = p_queue AND r.dispatch_epoch > 0
     AND r.partition_id = ANY (ARRAY(
           SELECT o.partition_id FROM q_partitions o WHERE o.queue = p_queue AND o.owner = p_owner))
     AND p.owner = p_owner AND r.dispatch_epoch = p.epoch
$$;
--> statement-breakpoint
-- q_reset_stale: returns to pending every row stamped by an older epoch of p_owner's
-- partitions (all of them when p_partitions is NULL). Rows another transaction holds are
-- skipped and left for a later call: this never blocks on them. Returns how many it reset.
CREATE OR REPLACE FUNCTION q_reset_stale(p_owner TEXT, p_queue TEXT, p_partitions INTEGER[])
RETURNS BIGINT LANGUAGE sql
SET enable_seqscan = off SET enable_bitmapscan = off SET search_path FROM CURRENT
AS $$
  WITH stale AS MATERIALIZED (
    SELECT r.ctid AS rid
      FROM q_requests r
      JOIN q_partitions p ON p.queue = r.queue AND p.partition_id = r.partition_id
     WHERE r.queue = p_queue AND r.dispatch_epoch > 0
       AND r.partition_id = ANY (ARRAY(
             SELECT o.partition_id FROM q_partitions o
              WHERE o.queue = p_queue AND o.owner = p_owner
                AND (p_partitions IS NULL OR o.partition_id = ANY (p_partitions))))
       AND p.owner = p_owner AND r.dispatch_epoch < p.epoch
       FOR UPDATE OF r SKIP LOCKED
  ),
  reset AS (
    UPDATE q_requests r SET dispatch_epoch = 0
     WHERE r.ctid = ANY (ARRAY(SELECT rid FROM stale))
    RETURNING 1
  )
  SELECT count(*) FROM reset
$$;
--> statement-breakpoint
-- q_undispatch: returns rows still carrying the given stamps, in partitions p_owner holds, to
-- pending; with p_not_before they also wait until then (defer). No epoch or draining check: the
-- exact attempt already names one dispatch. One primary-key update per stamp (see q_ack).
-- Returns how many rows it changed.
CREATE OR REPLACE FUNCTION q_undispatch(p_owner TEXT, p_ids TEXT[], p_tokens TEXT[], p_attempts BIGINT[],
  p_not_before BIGINT)
RETURNS BIGINT LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET search_path FROM CURRENT
AS $$
DECLARE
  v RECORD;
  v_changed BIGINT := 0;
BEGIN
  FOR v IN SELECT i.id, i.request_token, i.attempt
             FROM unnest(p_ids, p_tokens, p_attempts) AS i(id, request_token, attempt)
            ORDER BY i.id, i.request_token
  LOOP
    UPDATE q_requests r
       SET dispatch_epoch = 0, not_before = coalesce(p_not_before, r.not_before)
     WHERE r.id = v.id AND r.request_token = v.request_token
       AND r.dispatch_epoch <> 0 AND r.dispatch_attempt = v.attempt
       AND EXISTS (SELECT 1 FROM q_partitions p
                    WHERE p.queue = r.queue AND p.partition_id = r.partition_id AND p.owner = p_owner);
    IF FOUND THEN
      v_changed := v_changed + 1;
    END IF;
  END LOOP;
  RETURN v_changed;
END
$$;
--> statement-breakpoint
-- q_cancelled_keys: the subset of the given keys whose row is marked cancelled.
CREATE OR REPLACE FUNCTION q_cancelled_keys(p_ids TEXT[], p_tokens TEXT[])
RETURNS TABLE (cancelled_id TEXT, cancelled_token TEXT) LANGUAGE sql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off SET search_path FROM CURRENT
AS $$
  SELECT i.id, i.request_token
    FROM unnest(p_ids, p_tokens) AS i(id, request_token)
   CROSS JOIN LATERAL (
     SELECT 1 FROM q_requests r
      WHERE r.id = i.id AND r.request_token = i.request_token AND r.cancelled = 1
      LIMIT 1
   ) x
$$;
--> statement-breakpoint
-- q_pop_results: deletes and returns up to p_limit live results of the route in seq order.
-- Walking the route in seq order, it also deletes the expired results it meets (0 < expires_at
-- < p_now) without returning them, and walks on until it has p_limit live ones, the route is
-- exhausted, or it has walked 8 rounds (a route buried under expired results is cleaned over
-- several calls, or by expireResults). Every row it reads it deletes. Rows a concurrent popper
-- holds are skipped, so concurrent poppers get disjoint results.
CREATE OR REPLACE FUNCTION q_pop_results(p_route TEXT, p_now BIGINT, p_limit INTEGER)
RETURNS SETOF q_results LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET search_path FROM CURRENT
AS $$
DECLARE
  v_left INTEGER := p_limit;
  v_rows q_results[];
  v_live INTEGER;
BEGIN
  FOR v_round IN 1..8 LOOP
    EXIT WHEN v_left <= 0;
    WITH picked AS MATERIALIZED (
      SELECT s.ctid AS rid FROM q_results s
       WHERE s.route = p_route
       ORDER BY s.route, s.seq
       LIMIT v_left
         FOR UPDATE SKIP LOCKED
    ),
    gone AS (
      DELETE FROM q_results x
       WHERE x.ctid = ANY (ARRAY(SELECT rid FROM picked))
      RETURNING x.*
    )
    SELECT coalesce(array_agg(g ORDER BY g.seq), '{}') INTO v_rows FROM gone g;
    EXIT WHEN cardinality(v_rows) = 0;
    RETURN QUERY SELECT * FROM unnest(v_rows) AS u WHERE NOT (u.expires_at > 0 AND u.expires_at < p_now);
    GET DIAGNOSTICS v_live = ROW_COUNT;
    -- A short round means the route has nothing more this popper may take.
    EXIT WHEN cardinality(v_rows) < v_left;
    v_left := v_left - v_live;
  END LOOP;
END
$$;
--> statement-breakpoint
-- q_retry: parks the request still carrying the stamp, in a partition p_owner holds, until
-- p_not_before with a new envelope (payload kept). Returns how many rows changed (0 or 1).
CREATE OR REPLACE FUNCTION q_retry(p_owner TEXT, p_id TEXT, p_token TEXT, p_attempt BIGINT,
  p_not_before BIGINT, p_envelope TEXT)
RETURNS BIGINT LANGUAGE sql
SET enable_seqscan = off SET enable_bitmapscan = off SET search_path FROM CURRENT
AS $$
  WITH changed AS (
    UPDATE q_requests r
       SET dispatch_epoch = 0, not_before = p_not_before, envelope = p_envelope
     WHERE r.id = p_id AND r.request_token = p_token
       AND r.dispatch_epoch <> 0 AND r.dispatch_attempt = p_attempt
       AND EXISTS (SELECT 1 FROM q_partitions p
                    WHERE p.queue = r.queue AND p.partition_id = r.partition_id AND p.owner = p_owner)
    RETURNING 1
  )
  SELECT count(*) FROM changed
$$;
