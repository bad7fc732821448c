import { num, run, type Db, type Statement } from './db.js';

export const resetStaleStatement: Statement = {
  name: 'q_store_reset_stale',
  text: `SELECT async_reset_stale($1, $2, $3::int[]) AS n`,
};

/** Returns stale-epoch rows of `owner`'s partitions (`null`: all of them) to pending; returns how many. */
export async function resetStaleRequests(db: Db, owner: string, queue: string, partitions: number[] | null): Promise<number> {
  const { rows } = await run<{ n: string }>(db, resetStaleStatement, [owner, queue, partitions]);
  return num(rows[0]?.n ?? 0);
}
