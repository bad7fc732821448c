import { statement } from '@q/schema/internal';

// Slots in use per key counted only for holders whose lease has not lapsed, as acquires count them.
// last_limit: the limit the key's latest acquire passed (quota migration 0004), null before one.
/** Concurrency keys with the slots live holders use and the limit of their latest acquire. */
export const QUOTA_KEYS = statement(
  'q_dashboard_quota_keys',
  `SELECT k.key,
          coalesce((SELECT sum(s.used) FROM __q_schema__.q_quota_slots s
                      JOIN __q_schema__.q_quota_holders h ON h.holder = s.holder
                     WHERE s.key = k.key AND NOT h.lapsed
                       AND h.expires_ms > (extract(epoch FROM clock_timestamp()) * 1000)::int8), 0)::int8 AS used,
          (SELECT count(*) FROM __q_schema__.q_quota_slots s WHERE s.key = k.key)::int8 AS holders,
          k.last_limit
     FROM __q_schema__.q_quota_keys k
    ORDER BY k.key
    LIMIT 500`,
);
