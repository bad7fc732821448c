-- q-baseline through 0004_batch_api
-- Not run on an existing schema: a schema with none of this module's migrations gets this script,
-- the objects migrations 0000…0004_batch_api leave (pg_dump of them, unqualified), and the journal records
-- those migrations as applied. So a fresh install never creates the old unprefixed names, which
-- could collide with an application's own tables. migrate.test.ts checks it against the steps.
-- Functions come before the tables they read (pg_dump's order): their bodies are checked when
-- first called, as pg_dump's own scripts do.
SET LOCAL check_function_bodies = false;

CREATE FUNCTION q_ack(p_owner text, p_ids text[], p_tokens text[], p_attempts bigint[], p_routes text[], p_payloads text[], p_expires bigint[], p_ords integer[], p_now_ms bigint) RETURNS TABLE(acked_id text, acked_token text)
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET search_path FROM CURRENT
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

CREATE FUNCTION q_cancelled_keys(p_ids text[], p_tokens text[]) RETURNS TABLE(cancelled_id text, cancelled_token text)
    LANGUAGE sql STABLE
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET search_path FROM CURRENT
    AS $$
  SELECT i.id, i.request_token
    FROM unnest(p_ids, p_tokens) AS i(id, request_token)
   CROSS JOIN LATERAL (
     SELECT 1 FROM q_requests r
      WHERE r.id = i.id AND r.request_token = i.request_token AND r.cancelled = 1
      LIMIT 1
   ) x
$$;

CREATE TABLE q_requests (
    id text NOT NULL,
    request_token text NOT NULL,
    queue text NOT NULL,
    partition_id integer NOT NULL,
    deadline bigint NOT NULL,
    not_before bigint DEFAULT 0 NOT NULL,
    dispatch_epoch bigint DEFAULT 0 NOT NULL,
    dispatch_attempt bigint DEFAULT 0 NOT NULL,
    cancelled smallint DEFAULT 0 NOT NULL,
    envelope text NOT NULL,
    payload bytea NOT NULL,
    created_at bigint NOT NULL
)
WITH (fillfactor='70', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='10000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='10000', autovacuum_analyze_scale_factor='0.02', autovacuum_vacuum_cost_delay='0');

CREATE FUNCTION q_dispatch(p_owner text, p_queue text, p_now bigint, p_limit integer) RETURNS SETOF q_requests
    LANGUAGE sql
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET search_path FROM CURRENT
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

CREATE FUNCTION q_in_flight(p_owner text, p_queue text) RETURNS TABLE(stamp_id text, stamp_token text, stamp_attempt bigint)
    LANGUAGE sql STABLE
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET search_path FROM CURRENT
    AS $$
  SELECT r.id, r.request_token, r.dispatch_attempt
    FROM q_requests r
    JOIN q_partitions p ON p.queue = r.queue AND p.partition_id = r.partition_id
   WHERE r.queue = p_queue AND r.dispatch_epoch > 0
     AND r.partition_id = ANY (ARRAY(
           SELECT o.partition_id FROM q_partitions o WHERE o.queue = p_queue AND o.owner = p_owner))
     AND p.owner = p_owner AND r.dispatch_epoch = p.epoch
$$;

CREATE TABLE q_results (
    seq bigint NOT NULL,
    route text NOT NULL,
    id text NOT NULL,
    request_token text NOT NULL,
    payload text NOT NULL,
    expires_at bigint DEFAULT 0 NOT NULL,
    created_at bigint NOT NULL
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='10000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='10000', autovacuum_vacuum_cost_delay='0');

CREATE FUNCTION q_pop_results(p_route text, p_now bigint, p_limit integer) RETURNS SETOF q_results
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET search_path FROM CURRENT
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

CREATE FUNCTION q_reset_stale(p_owner text, p_queue text, p_partitions integer[]) RETURNS bigint
    LANGUAGE sql
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET search_path FROM CURRENT
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

CREATE FUNCTION q_retry(p_owner text, p_id text, p_token text, p_attempt bigint, p_not_before bigint, p_envelope text) RETURNS bigint
    LANGUAGE sql
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET search_path FROM CURRENT
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

CREATE FUNCTION q_undispatch(p_owner text, p_ids text[], p_tokens text[], p_attempts bigint[], p_not_before bigint) RETURNS bigint
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET search_path FROM CURRENT
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

CREATE SEQUENCE q_dispatch_attempts
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

CREATE TABLE q_dispatchers (
    queue text NOT NULL,
    owner text NOT NULL,
    expires_ms bigint NOT NULL
);

CREATE TABLE q_partitions (
    queue text NOT NULL,
    partition_id integer NOT NULL,
    owner text DEFAULT ''::text NOT NULL,
    epoch bigint DEFAULT 0 NOT NULL,
    draining smallint DEFAULT 0 NOT NULL,
    lease_expires_ms bigint DEFAULT 0 NOT NULL
)
WITH (fillfactor='50');

CREATE SEQUENCE q_results_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE q_results_seq_seq OWNED BY q_results.seq;

ALTER TABLE ONLY q_results ALTER COLUMN seq SET DEFAULT nextval('q_results_seq_seq'::regclass);

ALTER TABLE ONLY q_dispatchers
    ADD CONSTRAINT q_dispatchers_queue_owner_pk PRIMARY KEY (queue, owner);

ALTER TABLE ONLY q_partitions
    ADD CONSTRAINT q_partitions_queue_partition_id_pk PRIMARY KEY (queue, partition_id);

ALTER TABLE ONLY q_requests
    ADD CONSTRAINT q_requests_id_request_token_pk PRIMARY KEY (id, request_token);

ALTER TABLE ONLY q_results
    ADD CONSTRAINT q_results_pkey PRIMARY KEY (seq);

CREATE INDEX q_requests_inflight ON q_requests USING btree (queue, partition_id) WHERE (dispatch_epoch > 0);

CREATE INDEX q_requests_pending ON q_requests USING btree (queue, deadline, created_at) WHERE (dispatch_epoch = 0);

CREATE INDEX q_results_expires_at ON q_results USING btree (expires_at) WHERE (expires_at > 0);

CREATE INDEX q_results_expiry ON q_results USING btree (route, expires_at) WHERE (expires_at > 0);

CREATE INDEX q_results_route_seq ON q_results USING btree (route, seq);

CREATE TABLE q_batch_file_lines (
    file_id text NOT NULL,
    line_no integer NOT NULL,
    content bytea NOT NULL
);

CREATE TABLE q_batch_files (
    id text NOT NULL,
    tenant text NOT NULL,
    purpose text NOT NULL,
    filename text NOT NULL,
    bytes bigint DEFAULT 0 NOT NULL,
    lines integer DEFAULT 0 NOT NULL,
    status text DEFAULT 'uploading'::text NOT NULL,
    created_at bigint NOT NULL,
    expires_at bigint DEFAULT 0 NOT NULL
);

CREATE TABLE q_batch_requests (
    batch_id text NOT NULL,
    line_no integer NOT NULL,
    custom_id text NOT NULL,
    request_id text NOT NULL,
    state smallint DEFAULT 0 NOT NULL
);

CREATE TABLE q_batches (
    id text NOT NULL,
    tenant text NOT NULL,
    endpoint text NOT NULL,
    queue text NOT NULL,
    input_file_id text NOT NULL,
    output_file_id text,
    error_file_id text,
    status text DEFAULT 'validating'::text NOT NULL,
    completion_window text NOT NULL,
    deadline bigint NOT NULL,
    metadata jsonb,
    errors jsonb,
    total integer DEFAULT 0 NOT NULL,
    completed integer DEFAULT 0 NOT NULL,
    failed integer DEFAULT 0 NOT NULL,
    enqueued_lines integer DEFAULT 0 NOT NULL,
    prompt_tokens bigint DEFAULT 0 NOT NULL,
    completion_tokens bigint DEFAULT 0 NOT NULL,
    lease_owner text DEFAULT ''::text NOT NULL,
    lease_expires_ms bigint DEFAULT 0 NOT NULL,
    created_at bigint NOT NULL,
    in_progress_at bigint,
    finalizing_at bigint,
    completed_at bigint,
    failed_at bigint,
    expired_at bigint,
    cancelling_at bigint,
    cancelled_at bigint
);

ALTER TABLE ONLY q_batch_file_lines
    ADD CONSTRAINT q_batch_file_lines_file_id_line_no_pk PRIMARY KEY (file_id, line_no);

ALTER TABLE ONLY q_batch_files
    ADD CONSTRAINT q_batch_files_pkey PRIMARY KEY (id);

ALTER TABLE ONLY q_batch_requests
    ADD CONSTRAINT q_batch_requests_batch_id_line_no_pk PRIMARY KEY (batch_id, line_no);

ALTER TABLE ONLY q_batches
    ADD CONSTRAINT q_batches_pkey PRIMARY KEY (id);

CREATE INDEX q_batch_files_tenant_created ON q_batch_files USING btree (tenant, created_at, id);

CREATE UNIQUE INDEX q_batch_requests_custom_id ON q_batch_requests USING btree (batch_id, custom_id);

CREATE INDEX q_batch_requests_pending ON q_batch_requests USING btree (batch_id) WHERE (state = 0);

CREATE UNIQUE INDEX q_batch_requests_request_id ON q_batch_requests USING btree (request_id);

CREATE INDEX q_batches_tenant_created ON q_batches USING btree (tenant, created_at, id);

CREATE INDEX q_batches_unfinished ON q_batches USING btree (lease_expires_ms) WHERE (status = ANY (ARRAY['validating'::text, 'in_progress'::text, 'finalizing'::text, 'cancelling'::text]));

ALTER TABLE ONLY q_batch_file_lines
    ADD CONSTRAINT q_batch_file_lines_file_fk FOREIGN KEY (file_id) REFERENCES q_batch_files(id) ON DELETE CASCADE;

ALTER TABLE ONLY q_batch_requests
    ADD CONSTRAINT q_batch_requests_batch_fk FOREIGN KEY (batch_id) REFERENCES q_batches(id) ON DELETE CASCADE;

SET LOCAL check_function_bodies = true;
