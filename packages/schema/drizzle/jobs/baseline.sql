-- q-baseline through 0005_leader_leases
-- Not run on an existing schema: a schema with none of this module's migrations gets this script,
-- the objects migrations 0000…0005_leader_leases leave (pg_dump of them, unqualified), and the journal records
-- those migrations as applied. So a fresh install never creates the old unprefixed names, which
-- could collide with an application's own tables. migrate.test.ts checks it against the steps.
-- Functions come before the tables they read (pg_dump's order): their bodies are checked when
-- first called, as pg_dump's own scripts do.
SET LOCAL check_function_bodies = false;

CREATE TYPE q_job_status AS ENUM (
    'scheduled',
    'queued',
    'leased',
    'running',
    'retry_wait',
    'succeeded',
    'cancelled',
    'dead_letter'
);

CREATE TABLE q_jobs (
    id bigint NOT NULL,
    uuid uuid DEFAULT gen_random_uuid() NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    job_type text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    status q_job_status DEFAULT 'queued'::q_job_status NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    run_at timestamp with time zone DEFAULT now() NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    idempotency_key text,
    lock_key text,
    leased_by text,
    lease_token uuid,
    lease_expires_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    cancel_requested_at timestamp with time zone,
    last_error text,
    steps jsonb DEFAULT '[]'::jsonb NOT NULL,
    result jsonb,
    retry_of_id bigint,
    team_id bigint,
    resource_id bigint,
    correlation_id uuid,
    dead_lettered_at timestamp with time zone,
    finished_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    resume_count integer DEFAULT 0 NOT NULL,
    CONSTRAINT q_jobs_max_attempts_check CHECK ((max_attempts > 0))
)
WITH (fillfactor='80', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='10000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='10000', autovacuum_analyze_scale_factor='0.02', autovacuum_vacuum_cost_delay='0');

CREATE FUNCTION q_enqueue_job(queue text, type text, payload jsonb DEFAULT NULL::jsonb, options jsonb DEFAULT NULL::jsonb) RETURNS q_jobs
    LANGUAGE plpgsql
    SET search_path FROM CURRENT
    AS $$
#variable_conflict use_column
DECLARE
  v_queue TEXT := q_enqueue_job.queue;
  v_type TEXT := q_enqueue_job.type;
  v_payload JSONB := coalesce(nullif(q_enqueue_job.payload, 'null'::jsonb), '{}'::jsonb);
  v_opts JSONB := coalesce(nullif(q_enqueue_job.options, 'null'::jsonb), '{}'::jsonb);
  v_unknown TEXT;
  v_name TEXT;
  v_value JSONB;
  v_num NUMERIC;
  v_priority INTEGER := 0;
  v_run_at TIMESTAMPTZ;
  v_max_attempts INTEGER := 5;
  v_idempotency_key TEXT;
  v_lock_key TEXT;
  v_team_id BIGINT;
  v_resource_id BIGINT;
  v_retry_of_id BIGINT;
  v_job q_jobs;
BEGIN
  IF v_queue IS NULL OR v_queue = '' THEN
    RAISE EXCEPTION 'q_enqueue_job: queue must be a non-empty string' USING ERRCODE = '22023';
  END IF;
  IF v_type IS NULL THEN
    RAISE EXCEPTION 'q_enqueue_job: type must be a string' USING ERRCODE = '22023';
  END IF;
  IF jsonb_typeof(v_opts) <> 'object' THEN
    RAISE EXCEPTION 'q_enqueue_job: options must be a JSON object' USING ERRCODE = '22023';
  END IF;
  SELECT string_agg(k, ', ' ORDER BY k) INTO v_unknown FROM jsonb_object_keys(v_opts) AS k
   WHERE k NOT IN ('priority', 'runAt', 'maxAttempts', 'idempotencyKey', 'lockKey', 'teamId', 'resourceId', 'retryOfId');
  IF v_unknown IS NOT NULL THEN
    RAISE EXCEPTION 'q_enqueue_job: unknown option(s): %', v_unknown USING ERRCODE = '22023';
  END IF;

  -- Integers: JSON numbers without a fraction, in range.
  FOREACH v_name IN ARRAY ARRAY['priority', 'maxAttempts', 'teamId', 'resourceId', 'retryOfId'] LOOP
    v_value := nullif(v_opts -> v_name, 'null'::jsonb);
    CONTINUE WHEN v_value IS NULL;
    IF jsonb_typeof(v_value) <> 'number' THEN
      RAISE EXCEPTION 'q_enqueue_job: % must be an integer', v_name USING ERRCODE = '22023';
    END IF;
    v_num := (v_value #>> '{}')::numeric;
    IF v_num <> trunc(v_num) THEN
      RAISE EXCEPTION 'q_enqueue_job: % must be an integer', v_name USING ERRCODE = '22023';
    END IF;
    CASE v_name
      WHEN 'priority' THEN
        IF v_num NOT BETWEEN -2147483648 AND 2147483647 THEN
          RAISE EXCEPTION 'q_enqueue_job: priority must be an integer between -2147483648 and 2147483647' USING ERRCODE = '22023';
        END IF;
        v_priority := v_num;
      WHEN 'maxAttempts' THEN
        IF v_num NOT BETWEEN 1 AND 2147483647 THEN
          RAISE EXCEPTION 'q_enqueue_job: maxAttempts must be an integer between 1 and 2147483647' USING ERRCODE = '22023';
        END IF;
        v_max_attempts := v_num;
      ELSE
        IF v_num NOT BETWEEN -9007199254740991 AND 9007199254740991 THEN
          RAISE EXCEPTION 'q_enqueue_job: % must be a safe integer', v_name USING ERRCODE = '22023';
        END IF;
        CASE v_name
          WHEN 'teamId' THEN v_team_id := v_num;
          WHEN 'resourceId' THEN v_resource_id := v_num;
          ELSE v_retry_of_id := v_num;
        END CASE;
    END CASE;
  END LOOP;

  -- Keys: non-empty strings that fit a btree entry.
  FOREACH v_name IN ARRAY ARRAY['idempotencyKey', 'lockKey'] LOOP
    v_value := nullif(v_opts -> v_name, 'null'::jsonb);
    CONTINUE WHEN v_value IS NULL;
    IF jsonb_typeof(v_value) <> 'string' OR v_value #>> '{}' = '' THEN
      RAISE EXCEPTION 'q_enqueue_job: % must be a non-empty string', v_name USING ERRCODE = '22023';
    END IF;
    IF octet_length(v_value #>> '{}') > 2048 THEN
      RAISE EXCEPTION 'q_enqueue_job: % is longer than 2048 bytes', v_name USING ERRCODE = '22023';
    END IF;
    IF v_name = 'idempotencyKey' THEN v_idempotency_key := v_value #>> '{}'; ELSE v_lock_key := v_value #>> '{}'; END IF;
  END LOOP;

  v_value := nullif(v_opts -> 'runAt', 'null'::jsonb);
  IF v_value IS NOT NULL THEN
    IF jsonb_typeof(v_value) <> 'string' THEN
      RAISE EXCEPTION 'q_enqueue_job: runAt must be a timestamp string' USING ERRCODE = '22023';
    END IF;
    BEGIN
      v_run_at := (v_value #>> '{}')::timestamptz;
    EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow THEN
      RAISE EXCEPTION 'q_enqueue_job: runAt must be a timestamp string' USING ERRCODE = '22023';
    END;
    IF NOT isfinite(v_run_at) THEN
      RAISE EXCEPTION 'q_enqueue_job: runAt must be a finite timestamp' USING ERRCODE = '22023';
    END IF;
  END IF;

  IF v_retry_of_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM q_jobs WHERE id = v_retry_of_id) THEN
    RAISE EXCEPTION 'q_enqueue_job: retryOfId refers to a job that does not exist' USING ERRCODE = '22023';
  END IF;

  LOOP
    INSERT INTO q_jobs AS j (queue, job_type, payload, priority, run_at, status, max_attempts,
                           idempotency_key, lock_key, team_id, resource_id, retry_of_id)
    VALUES (v_queue, v_type, v_payload, v_priority,
            CASE WHEN v_run_at > now() THEN v_run_at ELSE now() END,
            CASE WHEN v_run_at > now() THEN 'scheduled'::q_job_status ELSE 'queued'::q_job_status END,
            v_max_attempts, v_idempotency_key, v_lock_key, v_team_id, v_resource_id, v_retry_of_id)
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING * INTO v_job;
    IF FOUND THEN
      IF v_job.status = 'queued' THEN
        PERFORM pg_notify('q_jobs_' || left(encode(sha256(convert_to(current_schema(), 'UTF8')), 'hex'), 24), 'q:' || v_job.queue);
      END IF;
      RETURN v_job;
    END IF;
    -- The key is held: by a job committed before (or written earlier in this transaction), or by
    -- one a concurrent transaction just committed (this statement sees it: read committed).
    SELECT * INTO v_job FROM q_jobs WHERE idempotency_key = v_idempotency_key;
    IF FOUND THEN
      RETURN v_job;
    END IF;
    -- The holder was deleted meanwhile (purged): the key is free again.
  END LOOP;
END
$$;

ALTER TABLE q_jobs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME q_jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE q_leader_leases (
    name text NOT NULL,
    owner text NOT NULL,
    epoch bigint NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    acquired_at timestamp with time zone NOT NULL,
    renewed_at timestamp with time zone NOT NULL,
    CONSTRAINT q_leader_leases_epoch_check CHECK ((epoch > 0))
);

ALTER TABLE ONLY q_jobs
    ADD CONSTRAINT q_jobs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY q_jobs
    ADD CONSTRAINT q_jobs_uuid_key UNIQUE (uuid);

ALTER TABLE ONLY q_leader_leases
    ADD CONSTRAINT q_leader_leases_pkey PRIMARY KEY (name);

CREATE INDEX q_jobs_dequeue_idx ON q_jobs USING btree (queue, priority DESC NULLS LAST, run_at, id) WHERE (status = 'queued'::q_job_status);

CREATE UNIQUE INDEX q_jobs_idempotency_key_key ON q_jobs USING btree (idempotency_key) WHERE (idempotency_key IS NOT NULL);

CREATE INDEX q_jobs_lease_expiry_idx ON q_jobs USING btree (lease_expires_at) WHERE (status = ANY (ARRAY['leased'::q_job_status, 'running'::q_job_status]));

CREATE UNIQUE INDEX q_jobs_lock_key_active_key ON q_jobs USING btree (lock_key) WHERE ((status = ANY (ARRAY['leased'::q_job_status, 'running'::q_job_status])) AND (lock_key IS NOT NULL));

CREATE INDEX q_jobs_status_id_idx ON q_jobs USING btree (status, id DESC NULLS LAST) WHERE (status = ANY (ARRAY['scheduled'::q_job_status, 'retry_wait'::q_job_status, 'dead_letter'::q_job_status, 'cancelled'::q_job_status]));

CREATE INDEX q_jobs_team_id_id_idx ON q_jobs USING btree (team_id, id DESC NULLS LAST) WHERE (team_id IS NOT NULL);

CREATE INDEX q_jobs_waiting_run_at_idx ON q_jobs USING btree (run_at) WHERE (status = ANY (ARRAY['scheduled'::q_job_status, 'retry_wait'::q_job_status]));

ALTER TABLE ONLY q_jobs
    ADD CONSTRAINT q_jobs_retry_of_id_fkey FOREIGN KEY (retry_of_id) REFERENCES q_jobs(id) ON DELETE SET NULL;

SET LOCAL check_function_bodies = true;
