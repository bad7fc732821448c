import { statement, type StatementScope } from '@q/schema/internal';
import { jobColumns, type JobRow } from '../row.js';
import type { Queryable } from './db.js';

// Through the key table: it names the holder of every kept key, live or archived, by its scope
// (queue, job type, key; migration 0009).
const TEXT = `SELECT ${jobColumns('j')} FROM __q_schema__.q_jobs_idempotency_keys k JOIN __q_schema__.q_jobs_all j ON j.id = k.job_id
WHERE k.scope IN (SELECT __q_schema__.q_idempotency_scope(s.queue, s.job_type, s.key)
                  FROM unnest($1::text[], $2::text[], $3::text[]) AS s(queue, job_type, key))`;

const TEXT_STMT = statement('q_jobs_get_by_idem', TEXT);

/** One idempotency key with the queue and type it is held in. */
export interface ScopedKey {
  queue: string;
  type: string;
  key: string;
}

/** The jobs holding the given scoped idempotency keys (used when a concurrent insert won a key). */
export async function getJobsByIdempotencyKey(scope: StatementScope, db: Queryable, keys: readonly ScopedKey[]): Promise<JobRow[]> {
  const { rows } = await scope.run<JobRow>(db, TEXT_STMT, [keys.map((k) => k.queue), keys.map((k) => k.type), keys.map((k) => k.key)]);
  return rows;
}
