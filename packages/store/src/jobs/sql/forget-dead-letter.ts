import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

// A dead letter is a finished job: it lives in the archive.
const TEXT = `
UPDATE __q_schema__.q_jobs_archive AS jobs SET status = 'cancelled', finished_at = now(), updated_at = now()
WHERE uuid = $1::uuid AND status = 'dead_letter'`;

const TEXT_STMT = statement('q_jobs_forget', TEXT);

/** dead_letter → cancelled; false when the job is not in the dead letter. */
export async function forgetDeadLetter(scope: StatementScope, db: Queryable, uuid: string): Promise<boolean> {
  const r = await scope.run(db, TEXT_STMT, [uuid]);
  return r.rowCount === 1;
}
