import { statement, type StatementScope } from '@q/schema/internal';
import { type Db } from './db.js';

// Every line of the batch still pending is settled as `state` (3 expired, 4 cancelled) with an
// error-file line `{ id, custom_id, response: null, error: { code, message } }`, counted as failed.
// With $5, a line whose request is in flight (dispatched, its answer still to come) is spared:
// a cancel lets it finish.
export const settleBatchLeftoversStatement = statement(
  'q_store_settle_batch_leftovers',
  `WITH moved AS (
     UPDATE __q_schema__.q_batch_requests r SET state = $2
      WHERE r.batch_id = $1 AND r.state = 0
        AND NOT ($5::bool AND EXISTS (SELECT 1 FROM __q_schema__.q_requests q WHERE q.id = r.request_id AND q.dispatch_epoch <> 0))
     RETURNING r.line_no, r.custom_id, r.request_id
   ), lines AS (
     SELECT convert_to(json_build_object('id', 'batch_req_' || md5(m.request_id), 'custom_id', m.custom_id, 'response', NULL,
              'error', json_build_object('code', $3::text, 'message', $4::text))::text || E'\\n', 'UTF8') AS content,
            row_number() OVER (ORDER BY m.line_no) AS k
       FROM moved m
   ), b AS (
     UPDATE __q_schema__.q_batches SET failed = failed + (SELECT count(*) FROM moved) WHERE id = $1 RETURNING error_file_id
   ), f AS (
     UPDATE __q_schema__.q_batch_files f SET lines = f.lines + (SELECT count(*) FROM lines),
            bytes = f.bytes + (SELECT coalesce(sum(length(content)), 0) FROM lines)
       FROM b WHERE f.id = b.error_file_id
     RETURNING f.id, f.lines - (SELECT count(*) FROM lines) AS base
   ), ins AS (
     INSERT INTO __q_schema__.q_batch_file_lines (file_id, line_no, content) SELECT f.id, f.base + l.k, l.content FROM f, lines l
   )
   SELECT count(*)::int AS n FROM moved`,
);

/** Settles a batch's pending lines as expired (3) or cancelled (4), with `code` and `message` in the error file (`spareInFlight`: not those in flight); how many. */
export async function settleBatchLeftovers(
  scope: StatementScope,
  db: Db,
  batchId: string,
  state: 3 | 4,
  code: string,
  message: string,
  spareInFlight: boolean,
): Promise<number> {
  const { rows } = await scope.run<{ n: number }>(db, settleBatchLeftoversStatement, [batchId, state, code, message, spareInFlight]);
  return rows[0]?.n ?? 0;
}
