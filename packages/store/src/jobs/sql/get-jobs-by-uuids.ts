import { statement, type StatementScope } from '@q/schema/internal';
import { jobColumns, type JobRow } from '../row.js';
import { liveJobByUuid } from './by-uuid.js';
import type { Queryable } from './db.js';

// The jobs with these uuids, live or archived; a uuid of neither (never made, or purged) has no
// row. Each uuid is looked up as get-job.ts looks up one (the live table by primary key, the
// archive by its uuid index), through a lateral join per uuid, so the cost is per waited job
// whatever the tables' sizes.
const TEXT = `SELECT ${jobColumns('j')} FROM unnest($1::uuid[]) AS w(uuid)
  CROSS JOIN LATERAL (SELECT * FROM __q_schema__.q_jobs j WHERE ${liveJobByUuid('j', 'w.uuid')}) j
UNION ALL
SELECT ${jobColumns('a')} FROM __q_schema__.q_jobs_archive a WHERE a.uuid = ANY($1::uuid[])`;

const TEXT_STMT = statement('q_jobs_get_uuids', TEXT);

/** The current rows of the jobs with these uuids (checked before), in no particular order. */
export async function getJobsByUuids(scope: StatementScope, db: Queryable, uuids: readonly string[]): Promise<JobRow[]> {
  const { rows } = await scope.run<JobRow>(db, TEXT_STMT, [uuids]);
  return rows;
}
