import { statement, type StatementScope } from '@q/schema/internal';
import { type Db } from './db.js';

export const deleteBatchFileStatement = statement(
  'q_store_delete_batch_file',
  `DELETE FROM __q_schema__.q_batch_files WHERE id = $1 AND tenant = $2 AND status = 'processed'`,
);

/** Deletes the tenant's file with its lines (cascade); false when there was none. */
export async function deleteBatchFile(scope: StatementScope, db: Db, tenant: string, id: string): Promise<boolean> {
  const { rowCount } = await scope.run(db, deleteBatchFileStatement, [id, tenant]);
  return (rowCount ?? 0) > 0;
}
