import { statement, type StatementScope } from '@q/schema/internal';
import type { BatchFileLine } from '../batch-types.js';
import { type Db } from './db.js';

export const appendBatchFileLinesStatement = statement(
  'q_store_append_batch_file_lines',
  `INSERT INTO __q_schema__.q_batch_file_lines (file_id, line_no, content)
   SELECT $1, l.line_no, l.content FROM unnest($2::int[], $3::bytea[]) AS l(line_no, content)
    WHERE EXISTS (SELECT 1 FROM __q_schema__.q_batch_files f WHERE f.id = $1 AND f.status = 'uploading')`,
);

/** Writes lines of a file still uploading; returns how many were written (0: no such file uploading). */
export async function appendBatchFileLines(scope: StatementScope, db: Db, fileId: string, lines: BatchFileLine[]): Promise<number> {
  const { rowCount } = await scope.run(db, appendBatchFileLinesStatement, [
    fileId,
    lines.map((l) => l.lineNo),
    lines.map((l) => Buffer.from(l.content.buffer, l.content.byteOffset, l.content.byteLength)),
  ]);
  return rowCount ?? 0;
}
