DROP INDEX "jobs_lock_key_active_key";--> statement-breakpoint
DROP INDEX "jobs_team_id_id_idx";--> statement-breakpoint
DROP INDEX "jobs_status_id_idx";--> statement-breakpoint
CREATE UNIQUE INDEX "jobs_lock_key_active_key" ON "jobs" USING btree ("lock_key") WHERE status IN ('leased', 'running') AND lock_key IS NOT NULL;--> statement-breakpoint
CREATE INDEX "jobs_team_id_id_idx" ON "jobs" USING btree ("team_id","id" DESC NULLS LAST) WHERE team_id IS NOT NULL;--> statement-breakpoint
CREATE INDEX "jobs_status_id_idx" ON "jobs" USING btree ("status","id" DESC NULLS LAST) WHERE status IN ('scheduled', 'retry_wait', 'dead_letter', 'cancelled');