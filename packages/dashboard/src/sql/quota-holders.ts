import { statement } from '@q/schema/internal';

/** Quota holders with their lease expiry (Unix ms), whether they lapsed, and the slots they hold. */
export const QUOTA_HOLDERS = statement(
  'q_dashboard_quota_holders',
  `SELECT h.holder, h.expires_ms::text AS expires_ms, h.lapsed,
          (extract(epoch FROM clock_timestamp()) * 1000)::int8::text AS now_ms,
          coalesce((SELECT sum(s.used) FROM __q_schema__.q_quota_slots s WHERE s.holder = h.holder), 0)::int8 AS slots
     FROM __q_schema__.q_quota_holders h
    ORDER BY h.holder
    LIMIT 500`,
);
