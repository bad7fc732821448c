import { statement, type StatementScope } from '@q/schema/internal';
import { type Db } from './db.js';
import { NOW_SECONDS } from './batch-rows.js';

export const createBatchFileStatement = statement(
  'q_store_create_batch_file',
  `INSERT INTO __q_schema__.q_batch_files (id, tenant, purpose, filename, created_at) VALUES ($1, $2, $3, $4, ${NOW_SECONDS})`,
);

/** Inserts an empty file in status `uploading` (invisible until sealed). */
export async function createBatchFile(
  scope: StatementScope,
  db: Db,
  id: string,
  tenant: string,
  purpose: string,
  filename: string,
): Promise<void> {
  await scope.run(db, createBatchFileStatement, [id, tenant, purpose, filename]);
}
