import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

// A handler's progress (#39), fenced by the lease token (the "still held" check, see
// complete-jobs.ts). Neither column is indexed, so the update can stay on its page (HOT).
const TEXT = `
UPDATE __q_schema__.q_jobs AS jobs SET progress = $3::jsonb, updated_at = now()
WHERE jobs.id = $1::int8 AND jobs.lease_token = $2::uuid`;

const TEXT_STMT = statement('q_jobs_update_progress', TEXT);

/** Stores `progress` (JSON text, or null for none) on a job whose lease is still held; false when fenced. */
export async function updateJobProgress(
  scope: StatementScope,
  db: Queryable,
  id: number,
  token: string,
  progress: string | null,
): Promise<boolean> {
  const r = await scope.run(db, TEXT_STMT, [id, token, progress]);
  return r.rowCount === 1;
}
