import { statement, type StatementScope } from '@q/schema/internal';
import type { Batch } from '../batch-types.js';
import { BATCH_COLUMNS, batchOf, type BatchRow } from './batch-rows.js';
import { type Db } from './db.js';

export const getBatchStatement = statement(
  'q_store_get_batch',
  `SELECT ${BATCH_COLUMNS} FROM __q_schema__.q_batches WHERE id = $1 AND tenant = $2`,
);

/** The tenant's batch `id`, or `undefined` (another tenant's batch is not found either). */
export async function getBatch(scope: StatementScope, db: Db, tenant: string, id: string): Promise<Batch | undefined> {
  const { rows } = await scope.run<BatchRow>(db, getBatchStatement, [id, tenant]);
  return rows[0] === undefined ? undefined : batchOf(rows[0]);
}
