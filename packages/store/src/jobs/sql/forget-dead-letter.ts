import type { Queryable } from './db.js';

const TEXT = `
UPDATE jobs SET status = 'cancelled', finished_at = now(), updated_at = now()
WHERE uuid = $1::uuid AND status = 'dead_letter'`;

/** dead_letter → cancelled; false when the job is not in the dead letter. */
export async function forgetDeadLetter(db: Queryable, uuid: string): Promise<boolean> {
  const r = await db.query({ name: 'q_jobs_forget', text: TEXT, values: [uuid] });
  return r.rowCount === 1;
}
