import { statement, type StatementScope } from '@q/schema/internal';
import type { BatchFile } from '../batch-types.js';
import { FILE_COLUMNS, fileOf, type FileRow } from './batch-rows.js';
import { type Db } from './db.js';

export const sealBatchFileStatement = statement(
  'q_store_seal_batch_file',
  `UPDATE __q_schema__.q_batch_files f
      SET status = 'processed',
          lines = (SELECT count(*) FROM __q_schema__.q_batch_file_lines l WHERE l.file_id = f.id),
          bytes = (SELECT coalesce(sum(length(l.content)), 0) FROM __q_schema__.q_batch_file_lines l WHERE l.file_id = f.id)
    WHERE f.id = $1 AND f.status = 'uploading'
   RETURNING ${FILE_COLUMNS}`,
);

/** Makes an uploaded file visible, its size and line count read from its lines; `undefined` when it was not uploading. */
export async function sealBatchFile(scope: StatementScope, db: Db, fileId: string): Promise<BatchFile | undefined> {
  const { rows } = await scope.run<FileRow>(db, sealBatchFileStatement, [fileId]);
  return rows[0] === undefined ? undefined : fileOf(rows[0]);
}
