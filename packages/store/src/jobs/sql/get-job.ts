import { jobColumns, type JobRow } from '../row.js';
import type { Queryable } from './db.js';

const BY_UUID = `SELECT ${jobColumns('j')} FROM jobs j WHERE j.uuid = $1::uuid`;
const BY_ID = `SELECT ${jobColumns('j')} FROM jobs j WHERE j.id = $1::int8`;

/** The job with this uuid, or `undefined`. */
export async function getJobByUuid(db: Queryable, uuid: string): Promise<JobRow | undefined> {
  const { rows } = await db.query<JobRow>({ name: 'q_jobs_get_uuid', text: BY_UUID, values: [uuid] });
  return rows[0];
}

/** The job with this id, or `undefined`. */
export async function getJobById(db: Queryable, id: number): Promise<JobRow | undefined> {
  const { rows } = await db.query<JobRow>({ name: 'q_jobs_get_id', text: BY_ID, values: [id] });
  return rows[0];
}
