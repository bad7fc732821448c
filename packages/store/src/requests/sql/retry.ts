import type { Stamp } from '../types.js';
import { num, run, type Db, type Statement } from './db.js';

export const retryStatement: Statement = {
  name: 'q_store_retry',
  text: `SELECT async_retry($1, $2, $3, $4, $5, $6) AS n`,
};

/** Parks the request carrying `stamp` until `notBefore` with a new envelope; false when fenced. */
export async function retryRequest(db: Db, owner: string, stamp: Stamp, notBefore: number, envelope: string): Promise<boolean> {
  const { rows } = await run<{ n: string }>(db, retryStatement, [owner, stamp.id, stamp.token, stamp.attempt, notBefore, envelope]);
  return num(rows[0]?.n ?? 0) === 1;
}
