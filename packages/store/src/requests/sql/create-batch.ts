import { statement, type StatementScope } from '@q/schema/internal';
import type { Batch, NewBatch } from '../batch-types.js';
import { BATCH_COLUMNS, batchOf, NOW_SECONDS, type BatchRow } from './batch-rows.js';
import { type Db } from './db.js';

// The batch, its (empty, still uploading) output and error files, all or nothing, and only when
// the input is a processed `batch` file of the same tenant.
export const createBatchStatement = statement(
  'q_store_create_batch',
  `WITH input AS (
     SELECT f.id, ${NOW_SECONDS} AS now FROM __q_schema__.q_batch_files f
      WHERE f.id = $3 AND f.tenant = $2 AND f.status = 'processed' AND f.purpose = 'batch'
   ), out_file AS (
     INSERT INTO __q_schema__.q_batch_files (id, tenant, purpose, filename, created_at)
     SELECT $9, $2, 'batch_output', $1 || '_output.jsonl', i.now FROM input i
   ), err_file AS (
     INSERT INTO __q_schema__.q_batch_files (id, tenant, purpose, filename, created_at)
     SELECT $10, $2, 'batch_output', $1 || '_error.jsonl', i.now FROM input i
   )
   INSERT INTO __q_schema__.q_batches (id, tenant, endpoint, queue, input_file_id, output_file_id, error_file_id, completion_window, deadline, metadata, created_at)
   SELECT $1, $2, $4, $5, i.id, $9, $10, $6, i.now + $7, $8::jsonb, i.now FROM input i
   RETURNING ${BATCH_COLUMNS}`,
);

/** Creates a batch in `validating`; `undefined` when the input is not a processed batch file of the tenant. */
export async function createBatch(
  scope: StatementScope,
  db: Db,
  ids: { batch: string; output: string; error: string },
  b: NewBatch,
): Promise<Batch | undefined> {
  const { rows } = await scope.run<BatchRow>(db, createBatchStatement, [
    ids.batch,
    b.tenant,
    b.inputFileId,
    b.endpoint,
    b.queue,
    b.completionWindow,
    b.windowSeconds,
    b.metadata === undefined || b.metadata === null ? null : JSON.stringify(b.metadata),
    ids.output,
    ids.error,
  ]);
  return rows[0] === undefined ? undefined : batchOf(rows[0]);
}
