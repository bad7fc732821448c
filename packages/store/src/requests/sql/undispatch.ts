import { statement, type StatementScope } from '@q/schema/internal';
import type { Stamp } from '../types.js';
import { num, type Db } from './db.js';

export const undispatchStatement = statement(
  'q_store_undispatch',
  `SELECT __q_schema__.q_undispatch($1, $2::text[], $3::text[], $4::bigint[], $5::bigint) AS n`,
);

/**
 * Returns rows still carrying the given (distinct) stamps in `owner`'s partitions to pending;
 * with `notBefore` (Unix s) they also wait until then. Returns how many rows changed.
 */
export async function undispatchRequests(
  scope: StatementScope,
  db: Db,
  owner: string,
  stamps: Stamp[],
  notBefore: number | null,
): Promise<number> {
  const { rows } = await scope.run<{ n: string }>(db, undispatchStatement, [
    owner,
    stamps.map((s) => s.id),
    stamps.map((s) => s.token),
    stamps.map((s) => s.attempt),
    notBefore,
  ]);
  return num(rows[0]?.n ?? 0);
}
