CREATE SEQUENCE "async_dispatch_attempts" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1;--> statement-breakpoint
CREATE TABLE "async_dispatchers" (
	"queue" text NOT NULL,
	"owner" text NOT NULL,
	"expires_ms" bigint NOT NULL,
	CONSTRAINT "async_dispatchers_queue_owner_pk" PRIMARY KEY("queue","owner")
);
--> statement-breakpoint
CREATE TABLE "async_partitions" (
	"queue" text NOT NULL,
	"partition_id" integer NOT NULL,
	"owner" text DEFAULT '' NOT NULL,
	"epoch" bigint DEFAULT 0 NOT NULL,
	"draining" smallint DEFAULT 0 NOT NULL,
	"lease_expires_ms" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "async_partitions_queue_partition_id_pk" PRIMARY KEY("queue","partition_id")
);
--> statement-breakpoint
CREATE TABLE "async_requests" (
	"id" text NOT NULL,
	"request_token" text NOT NULL,
	"queue" text NOT NULL,
	"partition_id" integer NOT NULL,
	"deadline" bigint NOT NULL,
	"not_before" bigint DEFAULT 0 NOT NULL,
	"dispatch_epoch" bigint DEFAULT 0 NOT NULL,
	"dispatch_attempt" bigint DEFAULT 0 NOT NULL,
	"cancelled" smallint DEFAULT 0 NOT NULL,
	"envelope" text NOT NULL,
	"payload" "bytea" NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "async_requests_id_request_token_pk" PRIMARY KEY("id","request_token")
);
--> statement-breakpoint
CREATE TABLE "async_results" (
	"seq" bigserial PRIMARY KEY NOT NULL,
	"route" text NOT NULL,
	"id" text NOT NULL,
	"request_token" text NOT NULL,
	"payload" text NOT NULL,
	"expires_at" bigint DEFAULT 0 NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "async_requests_pending" ON "async_requests" USING btree ("queue","deadline","created_at") WHERE dispatch_epoch = 0;--> statement-breakpoint
CREATE INDEX "async_requests_inflight" ON "async_requests" USING btree ("queue","partition_id") WHERE dispatch_epoch > 0;--> statement-breakpoint
CREATE INDEX "async_results_route_seq" ON "async_results" USING btree ("route","seq");--> statement-breakpoint
CREATE INDEX "async_results_expiry" ON "async_results" USING btree ("route","expires_at") WHERE expires_at > 0;--> statement-breakpoint
CREATE INDEX "async_results_expires_at" ON "async_results" USING btree ("expires_at") WHERE expires_at > 0;