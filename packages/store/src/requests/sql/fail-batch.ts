import { statement, type StatementScope } from '@q/schema/internal';
import type { BatchLineError } from '../batch-types.js';
import { NOW_SECONDS } from './batch-rows.js';
import { type Db } from './db.js';

// A batch whose input did not validate: `failed` with its errors, nothing enqueued; its empty
// output and error files are removed.
export const failBatchStatement = statement(
  'q_store_fail_batch',
  `WITH b AS (
     UPDATE __q_schema__.q_batches SET status = 'failed', failed_at = ${NOW_SECONDS}, errors = $3::jsonb,
            output_file_id = NULL, error_file_id = NULL
      WHERE id = $1 AND lease_owner = $2 AND status = 'validating'
     RETURNING id
   ), gone AS (
     DELETE FROM __q_schema__.q_batch_files f USING b WHERE f.id = ANY ($4::text[]) AND f.status = 'uploading'
   )
   SELECT id FROM b`,
);

/** Fails a validating batch `owner` holds; false when it no longer held it or the batch moved on. */
export async function failBatch(
  scope: StatementScope,
  db: Db,
  id: string,
  owner: string,
  errors: BatchLineError[],
  fileIds: string[],
): Promise<boolean> {
  const { rows } = await scope.run(db, failBatchStatement, [id, owner, JSON.stringify(errors), fileIds]);
  return rows.length > 0;
}
