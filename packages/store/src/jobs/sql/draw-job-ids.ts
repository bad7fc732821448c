import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

/**
 * The next job id, drawn from q_jobs' identity sequence, named by a regclass literal: resolved
 * once, when the statement is parsed (and again should the sequence change), so it costs no
 * lookup when it runs. Every path that makes the table names it q_jobs_id_seq: the baseline, and
 * migration 0004, which renamed it with the table. A lookup by pg_get_serial_sequence, run once
 * per statement as an InitPlan, searched the catalog on every execution: about 70 µs of a
 * single enqueue's 400 µs of database time (pgbench of the statement, commits not flushed).
 */
export const NEXT_JOB_ID = `nextval('__q_schema__.q_jobs_id_seq'::regclass)`;

// Ids for a batch split over several statements, drawn in one round trip and handed out in
// input order, so the batch keeps its order (FIFO) whatever order its statements insert in.
const TEXT = `SELECT ${NEXT_JOB_ID} AS id
FROM generate_series(1, $1::int4) ORDER BY 1`;

const TEXT_STMT = statement('q_jobs_draw_ids', TEXT);

/** `count` fresh job ids, ascending. */
export async function drawJobIds(scope: StatementScope, db: Queryable, count: number): Promise<number[]> {
  const { rows } = await scope.run<{ id: string }>(db, TEXT_STMT, [count]);
  return rows.map((r) => Number(r.id));
}
