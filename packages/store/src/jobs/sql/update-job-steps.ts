import type { Queryable } from './db.js';

const TEXT = `
UPDATE jobs SET steps = $3::jsonb, updated_at = now()
WHERE id = $1 AND lease_token = $2::uuid AND status IN ('leased', 'running')`;

/** Replaces the timeline of a job whose lease is still held; false when fenced. */
export async function updateJobSteps(db: Queryable, id: number, token: string, steps: string): Promise<boolean> {
  const r = await db.query({ name: 'q_jobs_update_steps', text: TEXT, values: [id, token, steps] });
  return r.rowCount === 1;
}
