import type { Queryable } from './db.js';

// Ids for a batch split over several statements, drawn in one round trip and handed out in
// input order, so the batch keeps its order (FIFO) whatever order its statements insert in.
const TEXT = `SELECT nextval(pg_get_serial_sequence('jobs', 'id')) AS id FROM generate_series(1, $1::int4) ORDER BY 1`;

/** `count` fresh job ids, ascending. */
export async function drawJobIds(db: Queryable, count: number): Promise<number[]> {
  const { rows } = await db.query<{ id: string }>({ name: 'q_jobs_draw_ids', text: TEXT, values: [count] });
  return rows.map((r) => Number(r.id));
}
