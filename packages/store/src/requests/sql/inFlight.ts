import type { Stamp } from '../types.js';
import { num, run, type Db, type Statement } from './db.js';

export const inFlightStatement: Statement = {
  name: 'q_store_in_flight',
  text: `SELECT stamp_id, stamp_token, stamp_attempt FROM async_in_flight($1, $2)`,
};

/** Current-epoch stamps of `owner`'s partitions of `queue`. */
export async function inFlightStamps(db: Db, owner: string, queue: string): Promise<Stamp[]> {
  const { rows } = await run<{ stamp_id: string; stamp_token: string; stamp_attempt: string }>(db, inFlightStatement, [owner, queue]);
  return rows.map((r) => ({ id: r.stamp_id, token: r.stamp_token, attempt: num(r.stamp_attempt) }));
}
