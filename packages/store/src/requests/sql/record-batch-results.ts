import { statement, type StatementScope } from '@q/schema/internal';
import type { BatchLineResult } from '../batch-types.js';
import { type Db } from './db.js';

// In one statement: the lines still pending move to completed (1) or failed (2), only those get
// their line appended to the output or error file (numbered after the file's last line), the
// batch's counts and token sums grow by them, and the consumed results are deleted from their
// route. A result seen twice (a driver that died after this statement and before noticing)
// moves nothing the second time, so no line is written twice.
export const recordBatchResultsStatement = statement(
  'q_store_record_batch_results',
  `WITH input AS (
     SELECT * FROM unnest($2::int[], $3::bool[], $4::bytea[], $5::bigint[], $6::bigint[]) WITH ORDINALITY AS i(line_no, ok, content, pt, ct, n)
   ), moved AS (
     UPDATE __q_schema__.q_batch_requests r SET state = CASE WHEN i.ok THEN 1 ELSE 2 END
       FROM input i
      WHERE r.batch_id = $1 AND r.line_no = i.line_no AND r.state = 0
     RETURNING r.line_no, i.ok, i.content, i.pt, i.ct, i.n
   ), gone AS (
     DELETE FROM __q_schema__.q_results WHERE seq = ANY ($7::bigint[])
   ), b AS (
     UPDATE __q_schema__.q_batches SET
            completed = completed + (SELECT count(*) FROM moved WHERE ok),
            failed = failed + (SELECT count(*) FROM moved WHERE NOT ok),
            prompt_tokens = prompt_tokens + (SELECT coalesce(sum(pt), 0) FROM moved),
            completion_tokens = completion_tokens + (SELECT coalesce(sum(ct), 0) FROM moved)
      WHERE id = $1
     RETURNING output_file_id, error_file_id
   ), files AS (
     UPDATE __q_schema__.q_batch_files f SET
            lines = f.lines + s.n,
            bytes = f.bytes + s.bytes
       FROM b, LATERAL (
         SELECT x.ok, count(*)::int AS n, sum(length(x.content))::bigint AS bytes FROM moved x GROUP BY x.ok
       ) s
      WHERE f.id = CASE WHEN s.ok THEN b.output_file_id ELSE b.error_file_id END
     RETURNING f.id, f.lines - s.n AS base, s.ok
   ), ins AS (
     INSERT INTO __q_schema__.q_batch_file_lines (file_id, line_no, content)
     SELECT f.id, f.base + row_number() OVER (PARTITION BY m.ok ORDER BY m.n), m.content
       FROM moved m JOIN files f ON f.ok = m.ok
   )
   SELECT coalesce(array_agg(line_no), '{}')::int[] AS lines FROM moved`,
);

/**
 * Writes the results of a batch's lines (see the statement) and deletes the route results
 * `seqs` they came from; returns the line numbers that moved (a line already settled is skipped).
 */
export async function recordBatchResults(
  scope: StatementScope,
  db: Db,
  batchId: string,
  results: BatchLineResult[],
  seqs: number[],
): Promise<number[]> {
  const { rows } = await scope.run<{ lines: number[] }>(db, recordBatchResultsStatement, [
    batchId,
    results.map((r) => r.lineNo),
    results.map((r) => r.ok),
    results.map((r) => Buffer.from(r.line.buffer, r.line.byteOffset, r.line.byteLength)),
    results.map((r) => r.promptTokens ?? 0),
    results.map((r) => r.completionTokens ?? 0),
    seqs,
  ]);
  return rows[0]?.lines ?? [];
}
