import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './queryable.js';

// Duplicate keys are summed so one call never updates a row twice; used never goes below zero.
const stmt = statement(
  'q_quota_release',
  `
UPDATE __q_schema__.q_quota_slots s SET used = greatest(s.used - r.n, 0)
  FROM (SELECT key, sum(n)::bigint AS n FROM unnest($2::text[], $3::int[]) AS u(key, n) GROUP BY key) r
 WHERE s.holder = $1 AND s.key = r.key`,
);

/** Gives back `counts[i]` slots of `keys[i]` held by `holder`; other holders' rows are untouched. */
export async function releaseQuotaSlots(scope: StatementScope, db: Queryable, holder: string, keys: string[], counts: number[]): Promise<void> {
  await scope.run(db, stmt, [holder, keys, counts]);
}
