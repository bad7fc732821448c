import { statement, type StatementScope } from '@q/schema';
import { jobColumns, type JobRow } from '../row.js';
import type { Queryable } from './db.js';

// q_jobs_all: the live and the archived jobs (one index probe in each).
const BY_UUID = `SELECT ${jobColumns('j')} FROM __q_schema__.q_jobs_all j WHERE j.uuid = $1::uuid`;
const BY_ID = `SELECT ${jobColumns('j')} FROM __q_schema__.q_jobs_all j WHERE j.id = $1::int8`;

const BY_UUID_STMT = statement('q_jobs_get_uuid', BY_UUID);
const BY_ID_STMT = statement('q_jobs_get_id', BY_ID);

/** The job with this uuid, or `undefined`. */
export async function getJobByUuid(scope: StatementScope, db: Queryable, uuid: string): Promise<JobRow | undefined> {
  const { rows } = await scope.run<JobRow>(db, BY_UUID_STMT, [uuid]);
  return rows[0];
}

/** The job with this id, or `undefined`. */
export async function getJobById(scope: StatementScope, db: Queryable, id: number): Promise<JobRow | undefined> {
  const { rows } = await scope.run<JobRow>(db, BY_ID_STMT, [id]);
  return rows[0];
}
