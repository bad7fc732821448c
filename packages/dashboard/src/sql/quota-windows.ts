import { statement } from '@q/schema/internal';

// Admissions inside each window, read through q_quota_admits_key (key, window_ms, at_ms).
/** Rate windows with the admissions of the current (sliding) window. */
export const QUOTA_WINDOWS = statement(
  'q_dashboard_quota_windows',
  `SELECT w.key, w.window_ms::text AS window_ms,
          coalesce((SELECT sum(a.n) FROM __q_schema__.q_quota_admits a
                     WHERE a.key = w.key AND a.window_ms = w.window_ms
                       AND a.at_ms > (extract(epoch FROM clock_timestamp()) * 1000)::int8 - w.window_ms), 0)::int8 AS admitted
     FROM __q_schema__.q_quota_windows w
    ORDER BY w.key, w.window_ms
    LIMIT 500`,
);
