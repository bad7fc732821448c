import { statement } from '@q/schema/internal';

/** The most recent batches of the Batch API (`$1`: how many), newest first. */
export const BATCHES = statement(
  'q_dashboard_batches',
  `SELECT id, tenant, queue, status, total, completed, failed, created_at::text AS created_at, deadline::text AS deadline
     FROM __q_schema__.q_batches
    ORDER BY created_at DESC, id DESC
    LIMIT $1`,
);
