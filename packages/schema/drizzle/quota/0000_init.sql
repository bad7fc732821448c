CREATE TABLE "async_quota_admits" (
	"key" text NOT NULL,
	"window_ms" bigint NOT NULL,
	"at_ms" bigint NOT NULL,
	"n" integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE "async_quota_holders" (
	"holder" text PRIMARY KEY NOT NULL,
	"expires_ms" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "async_quota_keys" (
	"key" text PRIMARY KEY NOT NULL
);
--> statement-breakpoint
CREATE TABLE "async_quota_slots" (
	"key" text NOT NULL,
	"holder" text NOT NULL,
	"used" integer NOT NULL,
	CONSTRAINT "async_quota_slots_key_holder_pk" PRIMARY KEY("key","holder")
);
--> statement-breakpoint
CREATE TABLE "async_quota_windows" (
	"key" text NOT NULL,
	"window_ms" bigint NOT NULL,
	"used" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "async_quota_windows_key_window_ms_pk" PRIMARY KEY("key","window_ms")
);
--> statement-breakpoint
CREATE INDEX "async_quota_admits_key" ON "async_quota_admits" USING btree ("key","window_ms","at_ms");--> statement-breakpoint
CREATE INDEX "async_quota_slots_holder" ON "async_quota_slots" USING btree ("holder");