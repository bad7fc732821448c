import { statement, type StatementScope } from '@q/schema/internal';
import { jobColumns, type JobRow } from '../row.js';
import { liveJobByUuid } from './by-uuid.js';
import type { Queryable } from './db.js';

// The live and the archived jobs: by primary key (or the partial uuid index) in q_jobs, by the
// uuid index in the archive. Spelled out rather than read through q_jobs_all, whose one condition
// could not say how the hot table is searched.
const BY_UUID = `SELECT ${jobColumns('j')} FROM __q_schema__.q_jobs j WHERE ${liveJobByUuid('j', '$1')}
UNION ALL
SELECT ${jobColumns('a')} FROM __q_schema__.q_jobs_archive a WHERE a.uuid = $1::uuid`;
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
