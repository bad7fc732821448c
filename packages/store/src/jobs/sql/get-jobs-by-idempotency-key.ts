import { statement, type StatementScope } from '@q/schema';
import { jobColumns, type JobRow } from '../row.js';
import type { Queryable } from './db.js';

// Through the key table: it names the holder of every kept key, live or archived.
const TEXT = `SELECT ${jobColumns('j')} FROM __q_schema__.q_jobs_idempotency_keys k JOIN __q_schema__.q_jobs_all j ON j.id = k.job_id
WHERE k.idempotency_key = ANY($1::text[])`;

const TEXT_STMT = statement('q_jobs_get_by_idem', TEXT);

/** The jobs holding the given idempotency keys (used when a concurrent insert won a key). */
export async function getJobsByIdempotencyKey(scope: StatementScope, db: Queryable, keys: string[]): Promise<JobRow[]> {
  const { rows } = await scope.run<JobRow>(db, TEXT_STMT, [keys]);
  return rows;
}
