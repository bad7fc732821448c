-- Planner-proof hot statements of the request queue.
--
-- A queue table is often analysed while empty, then refilled: its statistics then say "empty"
-- and the planner happily picks a sequential scan, a hash join over a full index scan or a
-- sort of the whole table, reading every row to hand out a handful. Each function below
-- disables those plan shapes for its own statements only (SET on the function), so every hot
-- statement walks an index from its keys and stops at its batch size, whatever the statistics
-- say. Each is called as one statement: one round trip, one transaction.
--
-- async_dispatch: stamps up to p_limit pending, due rows of the partitions p_owner holds and is
-- not draining with the partition's epoch and a fresh attempt; earliest deadline first, then
-- submission order. Rows locked by a concurrent dispatcher are skipped, never waited for.
CREATE OR REPLACE FUNCTION async_dispatch(p_owner TEXT, p_queue TEXT, p_now BIGINT, p_limit INTEGER)
RETURNS SETOF async_requests LANGUAGE sql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
  WITH picked AS MATERIALIZED (
    SELECT r.ctid AS rid
      FROM async_requests r
     WHERE r.queue = p_queue AND r.dispatch_epoch = 0 AND r.not_before <= p_now
       AND r.partition_id = ANY (ARRAY(
             SELECT p.partition_id FROM async_partitions p
              WHERE p.queue = p_queue AND p.owner = p_owner AND p.draining = 0))
     ORDER BY r.deadline, r.created_at
     LIMIT p_limit
       FOR UPDATE OF r SKIP LOCKED
  )
  UPDATE async_requests r
     SET dispatch_epoch = p.epoch, dispatch_attempt = nextval('async_dispatch_attempts')
    FROM picked, async_partitions p
   WHERE r.ctid = picked.rid AND r.dispatch_epoch = 0
     AND p.queue = r.queue AND p.partition_id = r.partition_id AND p.owner = p_owner AND p.draining = 0
  RETURNING r.*
$$;
--> statement-breakpoint
-- async_ack: deletes each request still in flight under the given attempt in a partition p_owner
-- holds at the row's epoch, and records its result, in one statement. Returns the acked keys.
-- Input keys must be distinct (the client dedupes); p_ords carries each key's input position so
-- results of one batch get their seq in input order.
CREATE OR REPLACE FUNCTION async_ack(p_owner TEXT, p_ids TEXT[], p_tokens TEXT[], p_attempts BIGINT[],
  p_routes TEXT[], p_payloads TEXT[], p_expires BIGINT[], p_ords INTEGER[], p_now_ms BIGINT)
RETURNS TABLE (acked_id TEXT, acked_token TEXT) LANGUAGE sql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
  WITH input AS (
    SELECT * FROM unnest(p_ids, p_tokens, p_attempts, p_routes, p_payloads, p_expires, p_ords)
      AS i(id, request_token, attempt, route, payload, expires_at, ord)
  ),
  done AS (
    DELETE FROM async_requests r
     USING input i, async_partitions p
     WHERE r.id = i.id AND r.request_token = i.request_token
       AND r.dispatch_epoch > 0 AND r.dispatch_attempt = i.attempt
       AND p.queue = r.queue AND p.partition_id = r.partition_id
       AND p.owner = p_owner AND p.epoch = r.dispatch_epoch
    RETURNING i.route, r.id, r.request_token, i.payload, i.expires_at, i.ord
  )
  INSERT INTO async_results (route, id, request_token, payload, expires_at, created_at)
  SELECT d.route, d.id, d.request_token, d.payload, d.expires_at, p_now_ms FROM done d ORDER BY d.ord
  RETURNING id, request_token
$$;
--> statement-breakpoint
-- async_in_flight: current-epoch stamps of p_owner's partitions (stale-epoch rows excluded).
CREATE OR REPLACE FUNCTION async_in_flight(p_owner TEXT, p_queue TEXT)
RETURNS TABLE (stamp_id TEXT, stamp_token TEXT, stamp_attempt BIGINT) LANGUAGE sql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
  SELECT r.id, r.request_token, r.dispatch_attempt
    FROM async_partitions p
    JOIN async_requests r
      ON r.queue = p.queue AND r.partition_id = p.partition_id
     AND r.dispatch_epoch > 0 AND r.dispatch_epoch = p.epoch
   WHERE p.queue = p_queue AND p.owner = p_owner
$$;
--> statement-breakpoint
-- async_reset_stale: returns to pending every row stamped by an older epoch of p_owner's
-- partitions (all of them when p_partitions is NULL). Rows another transaction holds are
-- skipped and left for a later call: this never blocks on them. Returns how many it reset.
CREATE OR REPLACE FUNCTION async_reset_stale(p_owner TEXT, p_queue TEXT, p_partitions INTEGER[])
RETURNS BIGINT LANGUAGE sql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
  WITH stale AS MATERIALIZED (
    SELECT r.ctid AS rid
      FROM async_partitions p
      JOIN async_requests r
        ON r.queue = p.queue AND r.partition_id = p.partition_id
       AND r.dispatch_epoch > 0 AND r.dispatch_epoch < p.epoch
     WHERE p.queue = p_queue AND p.owner = p_owner
       AND (p_partitions IS NULL OR p.partition_id = ANY (p_partitions))
       FOR UPDATE OF r SKIP LOCKED
  ),
  reset AS (
    UPDATE async_requests r SET dispatch_epoch = 0
      FROM stale
     WHERE r.ctid = stale.rid AND r.dispatch_epoch > 0
    RETURNING 1
  )
  SELECT count(*) FROM reset
$$;
--> statement-breakpoint
-- async_undispatch: returns rows still carrying the given stamps, in partitions p_owner holds, to
-- pending; with p_not_before they also wait until then (defer). No epoch or draining check: the
-- exact attempt already names one dispatch. Returns how many rows it changed.
CREATE OR REPLACE FUNCTION async_undispatch(p_owner TEXT, p_ids TEXT[], p_tokens TEXT[], p_attempts BIGINT[],
  p_not_before BIGINT)
RETURNS BIGINT LANGUAGE sql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
  WITH changed AS (
    UPDATE async_requests r
       SET dispatch_epoch = 0, not_before = coalesce(p_not_before, r.not_before)
      FROM unnest(p_ids, p_tokens, p_attempts) AS i(id, request_token, attempt), async_partitions p
     WHERE r.id = i.id AND r.request_token = i.request_token
       AND r.dispatch_epoch > 0 AND r.dispatch_attempt = i.attempt
       AND p.queue = r.queue AND p.partition_id = r.partition_id AND p.owner = p_owner
    RETURNING 1
  )
  SELECT count(*) FROM changed
$$;
--> statement-breakpoint
-- async_cancelled_keys: the subset of the given keys whose row is marked cancelled.
CREATE OR REPLACE FUNCTION async_cancelled_keys(p_ids TEXT[], p_tokens TEXT[])
RETURNS TABLE (cancelled_id TEXT, cancelled_token TEXT) LANGUAGE sql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
  SELECT r.id, r.request_token
    FROM unnest(p_ids, p_tokens) AS i(id, request_token)
    JOIN async_requests r ON r.id = i.id AND r.request_token = i.request_token
   WHERE r.cancelled = 1
$$;
--> statement-breakpoint
-- async_pop_results: drops the route's expired results (0 < expires_at < p_now), then deletes and
-- returns up to p_limit of its results in seq order. Rows a concurrent popper holds are skipped,
-- so concurrent poppers get disjoint results.
CREATE OR REPLACE FUNCTION async_pop_results(p_route TEXT, p_now BIGINT, p_limit INTEGER)
RETURNS SETOF async_results LANGUAGE sql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
  DELETE FROM async_results x
   WHERE x.seq IN (SELECT e.seq FROM async_results e
                    WHERE e.route = p_route AND e.expires_at > 0 AND e.expires_at < p_now
                      FOR UPDATE SKIP LOCKED);
  WITH picked AS MATERIALIZED (
    SELECT s.seq FROM async_results s
     WHERE s.route = p_route
     ORDER BY s.seq
     LIMIT p_limit
       FOR UPDATE SKIP LOCKED
  )
  DELETE FROM async_results x
   USING picked
   WHERE x.seq = picked.seq
  RETURNING x.*
$$;
