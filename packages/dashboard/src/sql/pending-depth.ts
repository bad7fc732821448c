import { statement } from '@q/schema/internal';

// Pending requests per queue and deadline window, read through q_requests_pending (queue,
// deadline, created_at WHERE dispatch_epoch = 0). Deadlines are Unix seconds.
/** Pending requests per queue in deadline windows: already expired, within a minute, within ten, later. */
export const PENDING_DEPTH = statement(
  'q_dashboard_pending_depth',
  `WITH now_s AS (SELECT extract(epoch FROM clock_timestamp())::int8 AS t)
   SELECT r.queue,
          count(*)::int8 AS pending,
          count(*) FILTER (WHERE r.deadline <= n.t)::int8 AS expired,
          count(*) FILTER (WHERE r.deadline > n.t AND r.deadline <= n.t + 60)::int8 AS within_1m,
          count(*) FILTER (WHERE r.deadline > n.t + 60 AND r.deadline <= n.t + 600)::int8 AS within_10m,
          count(*) FILTER (WHERE r.deadline > n.t + 600)::int8 AS later
     FROM __q_schema__.q_requests r, now_s n
    WHERE r.dispatch_epoch = 0
    GROUP BY r.queue
    ORDER BY r.queue`,
);
