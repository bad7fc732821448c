import { DB_NOW_MS, type Queryable } from './queryable.js';

const text = `INSERT INTO async_quota_holders (holder, expires_ms) VALUES ($1, ${DB_NOW_MS} + $2::bigint)`;

/** Inserts a holder whose lease ends `ttlMs` from now (database clock). A taken name fails with 23505. */
export async function registerQuotaHolder(db: Queryable, holder: string, ttlMs: number): Promise<void> {
  await db.query({ name: 'q_quota_register_holder', text, values: [holder, ttlMs] });
}
