import { jobColumns, type JobRow } from '../row.js';
import type { Queryable } from './db.js';

const TEXT = `SELECT ${jobColumns('j')} FROM jobs j WHERE j.idempotency_key = ANY($1::text[])`;

/** The jobs holding the given idempotency keys (used when a concurrent insert won a key). */
export async function getJobsByIdempotencyKey(db: Queryable, keys: string[]): Promise<JobRow[]> {
  const { rows } = await db.query<JobRow>({ name: 'q_jobs_get_by_idem', text: TEXT, values: [keys] });
  return rows;
}
