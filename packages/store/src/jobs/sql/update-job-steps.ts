import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

const TEXT = `
UPDATE __q_schema__.q_jobs AS jobs SET steps = $3::jsonb, updated_at = now()
WHERE id = $1 AND lease_token = $2::uuid AND status IN ('leased', 'running')`;

const TEXT_STMT = statement('q_jobs_update_steps', TEXT);

/** Replaces the timeline of a job whose lease is still held; false when fenced. */
export async function updateJobSteps(scope: StatementScope, db: Queryable, id: number, token: string, steps: string): Promise<boolean> {
  const r = await scope.run(db, TEXT_STMT, [id, token, steps]);
  return r.rowCount === 1;
}
