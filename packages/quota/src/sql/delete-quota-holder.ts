import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './queryable.js';

const stmt = statement(
  'q_quota_delete_holder',
  `
WITH slots AS (DELETE FROM __q_schema__.q_quota_slots WHERE holder = $1)
DELETE FROM __q_schema__.q_quota_holders WHERE holder = $1`,
);

/** Deletes a holder and its slot rows in one statement; its slots stop counting at once. */
export async function deleteQuotaHolder(scope: StatementScope, db: Queryable, holder: string): Promise<void> {
  await scope.run(db, stmt, [holder]);
}
