import { statement, type StatementScope } from '@q/schema';
import type { Queryable } from './db.js';

// Ids for a batch split over several statements, drawn in one round trip and handed out in
// input order, so the batch keeps its order (FIFO) whatever order its statements insert in. The
// sequence is looked up once, by a sub-select (an InitPlan), not once per id.
const TEXT = `SELECT nextval((SELECT pg_get_serial_sequence('__q_schema__.q_jobs', 'id')::regclass)) AS id
FROM generate_series(1, $1::int4) ORDER BY 1`;

const TEXT_STMT = statement('q_jobs_draw_ids', TEXT);

/** `count` fresh job ids, ascending. */
export async function drawJobIds(scope: StatementScope, db: Queryable, count: number): Promise<number[]> {
  const { rows } = await scope.run<{ id: string }>(db, TEXT_STMT, [count]);
  return rows.map((r) => Number(r.id));
}
