import { statement, type StatementScope } from '@q/schema/internal';
import type { Batch, Page } from '../batch-types.js';
import { BATCH_COLUMNS, batchOf, type BatchRow } from './batch-rows.js';
import { type Db } from './db.js';

// Newest first; `after` is the id of the last batch of the previous page.
export const listBatchesStatement = statement(
  'q_store_list_batches',
  `SELECT ${BATCH_COLUMNS} FROM __q_schema__.q_batches b
    WHERE b.tenant = $1
      AND ($2::text IS NULL OR (b.created_at, b.id) < (SELECT a.created_at, a.id FROM __q_schema__.q_batches a WHERE a.id = $2 AND a.tenant = $1))
    ORDER BY b.created_at DESC, b.id DESC LIMIT $3`,
);

/** A page of the tenant's batches, newest first. */
export async function listBatches(scope: StatementScope, db: Db, tenant: string, after: string | null, limit: number): Promise<Page<Batch>> {
  const { rows } = await scope.run<BatchRow>(db, listBatchesStatement, [tenant, after, limit + 1]);
  return { data: rows.slice(0, limit).map(batchOf), hasMore: rows.length > limit };
}
