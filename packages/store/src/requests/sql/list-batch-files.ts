import { statement, type StatementScope } from '@q/schema/internal';
import type { BatchFile, Page } from '../batch-types.js';
import { FILE_COLUMNS, fileOf, type FileRow } from './batch-rows.js';
import { type Db } from './db.js';

// Newest first; `after` is the id of the last file of the previous page.
export const listBatchFilesStatement = statement(
  'q_store_list_batch_files',
  `SELECT ${FILE_COLUMNS} FROM __q_schema__.q_batch_files f
    WHERE f.tenant = $1 AND f.status = 'processed' AND ($2::text IS NULL OR f.purpose = $2)
      AND ($3::text IS NULL OR (f.created_at, f.id) < (SELECT a.created_at, a.id FROM __q_schema__.q_batch_files a WHERE a.id = $3 AND a.tenant = $1))
    ORDER BY f.created_at DESC, f.id DESC LIMIT $4`,
);

/** A page of the tenant's processed files, newest first. */
export async function listBatchFiles(
  scope: StatementScope,
  db: Db,
  tenant: string,
  purpose: string | null,
  after: string | null,
  limit: number,
): Promise<Page<BatchFile>> {
  const { rows } = await scope.run<FileRow>(db, listBatchFilesStatement, [tenant, purpose, after, limit + 1]);
  return { data: rows.slice(0, limit).map(fileOf), hasMore: rows.length > limit };
}
