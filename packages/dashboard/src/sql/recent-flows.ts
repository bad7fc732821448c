import { statement } from '@q/schema/internal';

/** The most recent flows (`$1`: how many), newest first. */
export const RECENT_FLOWS = statement(
  'q_dashboard_recent_flows',
  `SELECT id::text AS id, name, created_at FROM __q_schema__.q_flows ORDER BY created_at DESC LIMIT $1`,
);
