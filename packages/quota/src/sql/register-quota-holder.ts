import { statement, type StatementScope } from '@q/schema/internal';
import { DB_NOW_MS, type Queryable } from './queryable.js';

const stmt = statement(
  'q_quota_register_holder',
  `INSERT INTO __q_schema__.q_quota_holders (holder, expires_ms) VALUES ($1, ${DB_NOW_MS} + $2::bigint)`,
);

/** Inserts a holder whose lease ends `ttlMs` from now (database clock). A taken name fails with 23505. */
export async function registerQuotaHolder(scope: StatementScope, db: Queryable, holder: string, ttlMs: number): Promise<void> {
  await scope.run(db, stmt, [holder, ttlMs]);
}
