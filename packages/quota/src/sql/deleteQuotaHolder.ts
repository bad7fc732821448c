import type { Queryable } from './queryable.js';

const text = `
WITH slots AS (DELETE FROM async_quota_slots WHERE holder = $1)
DELETE FROM async_quota_holders WHERE holder = $1`;

/** Deletes a holder and its slot rows in one statement; its slots stop counting at once. */
export async function deleteQuotaHolder(db: Queryable, holder: string): Promise<void> {
  await db.query({ name: 'q_quota_delete_holder', text, values: [holder] });
}
