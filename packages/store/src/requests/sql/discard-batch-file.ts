import { statement, type StatementScope } from '@q/schema/internal';
import { type Db } from './db.js';

export const discardBatchFileStatement = statement(
  'q_store_discard_batch_file',
  `DELETE FROM __q_schema__.q_batch_files WHERE id = $1 AND status = 'uploading'`,
);

/** Deletes a file whose upload failed, with the lines written so far. */
export async function discardBatchFile(scope: StatementScope, db: Db, id: string): Promise<void> {
  await scope.run(db, discardBatchFileStatement, [id]);
}
