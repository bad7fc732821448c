-- The Batch API's storage (issue 43): files as one row per line (a 200 MB upload is streamed in
-- and out a page of lines at a time), batches, and one row per request line mapping it to its
-- request-queue request, whose state change is what writes its result line exactly once.
CREATE TABLE "q_batch_file_lines" (
	"file_id" text NOT NULL,
	"line_no" integer NOT NULL,
	"content" "bytea" NOT NULL,
	CONSTRAINT "q_batch_file_lines_file_id_line_no_pk" PRIMARY KEY("file_id","line_no")
);
--> statement-breakpoint
CREATE TABLE "q_batch_files" (
	"id" text PRIMARY KEY NOT NULL,
	"tenant" text NOT NULL,
	"purpose" text NOT NULL,
	"filename" text NOT NULL,
	"bytes" bigint DEFAULT 0 NOT NULL,
	"lines" integer DEFAULT 0 NOT NULL,
	"status" text DEFAULT 'uploading' NOT NULL,
	"created_at" bigint NOT NULL,
	"expires_at" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "q_batch_requests" (
	"batch_id" text NOT NULL,
	"line_no" integer NOT NULL,
	"custom_id" text NOT NULL,
	"request_id" text NOT NULL,
	"state" smallint DEFAULT 0 NOT NULL,
	CONSTRAINT "q_batch_requests_batch_id_line_no_pk" PRIMARY KEY("batch_id","line_no")
);
--> statement-breakpoint
CREATE TABLE "q_batches" (
	"id" text PRIMARY KEY NOT NULL,
	"tenant" text NOT NULL,
	"endpoint" text NOT NULL,
	"queue" text NOT NULL,
	"input_file_id" text NOT NULL,
	"output_file_id" text,
	"error_file_id" text,
	"status" text DEFAULT 'validating' NOT NULL,
	"completion_window" text NOT NULL,
	"deadline" bigint NOT NULL,
	"metadata" jsonb,
	"errors" jsonb,
	"total" integer DEFAULT 0 NOT NULL,
	"completed" integer DEFAULT 0 NOT NULL,
	"failed" integer DEFAULT 0 NOT NULL,
	"enqueued_lines" integer DEFAULT 0 NOT NULL,
	"prompt_tokens" bigint DEFAULT 0 NOT NULL,
	"completion_tokens" bigint DEFAULT 0 NOT NULL,
	"lease_owner" text DEFAULT '' NOT NULL,
	"lease_expires_ms" bigint DEFAULT 0 NOT NULL,
	"created_at" bigint NOT NULL,
	"in_progress_at" bigint,
	"finalizing_at" bigint,
	"completed_at" bigint,
	"failed_at" bigint,
	"expired_at" bigint,
	"cancelling_at" bigint,
	"cancelled_at" bigint
);
--> statement-breakpoint
ALTER TABLE "q_batch_file_lines" ADD CONSTRAINT "q_batch_file_lines_file_fk" FOREIGN KEY ("file_id") REFERENCES "q_batch_files"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "q_batch_requests" ADD CONSTRAINT "q_batch_requests_batch_fk" FOREIGN KEY ("batch_id") REFERENCES "q_batches"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "q_batch_files_tenant_created" ON "q_batch_files" USING btree ("tenant","created_at","id");--> statement-breakpoint
CREATE UNIQUE INDEX "q_batch_requests_custom_id" ON "q_batch_requests" USING btree ("batch_id","custom_id");--> statement-breakpoint
CREATE UNIQUE INDEX "q_batch_requests_request_id" ON "q_batch_requests" USING btree ("request_id");--> statement-breakpoint
CREATE INDEX "q_batch_requests_pending" ON "q_batch_requests" USING btree ("batch_id") WHERE state = 0;--> statement-breakpoint
CREATE INDEX "q_batches_tenant_created" ON "q_batches" USING btree ("tenant","created_at","id");--> statement-breakpoint
CREATE INDEX "q_batches_unfinished" ON "q_batches" USING btree ("lease_expires_ms") WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');