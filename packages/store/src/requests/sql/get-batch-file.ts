import { statement, type StatementScope } from '@q/schema/internal';
import type { BatchFile } from '../batch-types.js';
import { FILE_COLUMNS, fileOf, type FileRow } from './batch-rows.js';
import { type Db } from './db.js';

export const getBatchFileStatement = statement(
  'q_store_get_batch_file',
  `SELECT ${FILE_COLUMNS} FROM __q_schema__.q_batch_files WHERE id = $1 AND tenant = $2 AND status = 'processed'`,
);

/** The tenant's processed file `id`, or `undefined` (another tenant's file is not found either). */
export async function getBatchFile(scope: StatementScope, db: Db, tenant: string, id: string): Promise<BatchFile | undefined> {
  const { rows } = await scope.run<FileRow>(db, getBatchFileStatement, [id, tenant]);
  return rows[0] === undefined ? undefined : fileOf(rows[0]);
}
