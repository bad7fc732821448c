import { statement, type StatementScope } from '@q/schema/internal';
import type { Stamp } from '../types.js';
import { num, type Db } from './db.js';

export const inFlightStatement = statement(
  'q_store_in_flight',
  `SELECT stamp_id, stamp_token, stamp_attempt FROM __q_schema__.q_in_flight($1, $2)`,
);

/** Current-epoch stamps of `owner`'s partitions of `queue`. */
export async function inFlightStamps(scope: StatementScope, db: Db, owner: string, queue: string): Promise<Stamp[]> {
  const { rows } = await scope.run<{ stamp_id: string; stamp_token: string; stamp_attempt: string }>(db, inFlightStatement, [owner, queue]);
  return rows.map((r) => ({ id: r.stamp_id, token: r.stamp_token, attempt: num(r.stamp_attempt) }));
}
