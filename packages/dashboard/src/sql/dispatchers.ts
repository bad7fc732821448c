import { statement } from '@q/schema/internal';

/** The live members of every request queue (membership rows not yet expired on the database clock). */
export const DISPATCHERS = statement(
  'q_dashboard_dispatchers',
  `SELECT queue, owner, expires_ms::text AS expires_ms
     FROM __q_schema__.q_dispatchers
    WHERE expires_ms > (extract(epoch FROM clock_timestamp()) * 1000)::int8
    ORDER BY queue, owner`,
);
