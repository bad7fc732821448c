import { statement } from '@q/schema/internal';

// The 64 partition rows of every queue with each one's in-flight count, read through
// q_requests_inflight (queue, partition_id WHERE dispatch_epoch > 0).
/** Every partition of every request queue: owner, epoch, draining flag, lease expiry and in-flight requests. */
export const PARTITIONS = statement(
  'q_dashboard_partitions',
  `SELECT p.queue, p.partition_id, p.owner, p.epoch::text AS epoch, p.draining <> 0 AS draining,
          p.lease_expires_ms::text AS lease_expires_ms,
          (SELECT count(*) FROM __q_schema__.q_requests r
            WHERE r.queue = p.queue AND r.partition_id = p.partition_id AND r.dispatch_epoch > 0)::int8 AS in_flight
     FROM __q_schema__.q_partitions p
    ORDER BY p.queue, p.partition_id`,
);
