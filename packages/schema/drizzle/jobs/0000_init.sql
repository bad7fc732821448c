CREATE TYPE "job_status" AS ENUM('scheduled', 'queued', 'leased', 'running', 'retry_wait', 'succeeded', 'cancelled', 'dead_letter');--> statement-breakpoint
CREATE TABLE "jobs" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "jobs_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uuid" uuid DEFAULT gen_random_uuid() NOT NULL,
	"queue" text DEFAULT 'default' NOT NULL,
	"job_type" text NOT NULL,
	"payload" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"status" "job_status" DEFAULT 'queued' NOT NULL,
	"priority" integer DEFAULT 0 NOT NULL,
	"run_at" timestamp with time zone DEFAULT now() NOT NULL,
	"attempt" integer DEFAULT 0 NOT NULL,
	"max_attempts" integer DEFAULT 5 NOT NULL,
	"idempotency_key" text,
	"lock_key" text,
	"leased_by" text,
	"lease_token" uuid,
	"lease_expires_at" timestamp with time zone,
	"heartbeat_at" timestamp with time zone,
	"cancel_requested_at" timestamp with time zone,
	"last_error" text,
	"steps" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"result" jsonb,
	"retry_of_id" bigint,
	"team_id" bigint,
	"resource_id" bigint,
	"correlation_id" uuid,
	"dead_lettered_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"resume_count" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "jobs_uuid_key" UNIQUE("uuid")
);
--> statement-breakpoint
CREATE UNIQUE INDEX "jobs_idempotency_key_key" ON "jobs" USING btree ("idempotency_key") WHERE idempotency_key IS NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "jobs_lock_key_active_key" ON "jobs" USING btree ("lock_key") WHERE status IN ('leased', 'running');--> statement-breakpoint
CREATE INDEX "jobs_dequeue_idx" ON "jobs" USING btree ("queue","priority" DESC NULLS LAST,"run_at","id") WHERE status = 'queued';--> statement-breakpoint
CREATE INDEX "jobs_lease_expiry_idx" ON "jobs" USING btree ("lease_expires_at") WHERE status IN ('leased', 'running');--> statement-breakpoint
CREATE INDEX "jobs_waiting_run_at_idx" ON "jobs" USING btree ("run_at") WHERE status IN ('scheduled', 'retry_wait');--> statement-breakpoint
CREATE INDEX "jobs_team_id_id_idx" ON "jobs" USING btree ("team_id","id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "jobs_status_id_idx" ON "jobs" USING btree ("status","id" DESC NULLS LAST);