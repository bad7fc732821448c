import { statement, type StatementScope } from '@q/schema/internal';
import type { BatchFileLine } from '../batch-types.js';
import { type Db } from './db.js';

export const readBatchFileLinesStatement = statement(
  'q_store_read_batch_file_lines',
  `SELECT line_no, content FROM __q_schema__.q_batch_file_lines WHERE file_id = $1 AND line_no > $2 ORDER BY line_no LIMIT $3`,
);

/** Up to `limit` lines of a file after line `afterLine`, in order (a page of a streamed read). */
export async function readBatchFileLines(
  scope: StatementScope,
  db: Db,
  fileId: string,
  afterLine: number,
  limit: number,
): Promise<BatchFileLine[]> {
  const { rows } = await scope.run<{ line_no: number; content: Buffer }>(db, readBatchFileLinesStatement, [fileId, afterLine, limit]);
  return rows.map((r) => ({ lineNo: r.line_no, content: r.content }));
}
