import { statement, type StatementScope } from '@q/schema';
import type { Queryable } from './db.js';

/**
 * The next job id, drawn from q_jobs' identity sequence. The sequence is looked up by a
 * sub-select (an InitPlan, run once per statement): written as a one-row FROM item, the planner
 * pulls it up into nextval's argument, and the catalog lookup of pg_get_serial_sequence then ran
 * for every row, about a third of a 1,000-job batch's time.
 */
export const NEXT_JOB_ID = `nextval((SELECT pg_get_serial_sequence('__q_schema__.q_jobs', 'id')::regclass))`;

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
