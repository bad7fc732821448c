-- Queue tables churn their whole contents: fixed row-count autovacuum thresholds stop dead
-- tuples piling up at the head of the pending index, where dispatch reads.
ALTER TABLE "async_requests" SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000, autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);
--> statement-breakpoint
ALTER TABLE "async_results" SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000, autovacuum_vacuum_cost_delay = 0);
--> statement-breakpoint
-- Lease rows are updated on every heartbeat: leave room for HOT updates.
ALTER TABLE "async_partitions" SET (fillfactor = 50);
