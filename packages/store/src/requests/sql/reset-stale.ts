import { statement, type StatementScope } from '@q/schema/internal';
import { num, type Db } from './db.js';

export const resetStaleStatement = statement('q_store_reset_stale', `SELECT __q_schema__.q_reset_stale($1, $2, $3::int[]) AS n`);

/** Returns stale-epoch rows of `owner`'s partitions (`null`: all of them) to pending; returns how many. */
export async function resetStaleRequests(
  scope: StatementScope,
  db: Db,
  owner: string,
  queue: string,
  partitions: number[] | null,
): Promise<number> {
  const { rows } = await scope.run<{ n: string }>(db, resetStaleStatement, [owner, queue, partitions]);
  return num(rows[0]?.n ?? 0);
}
