import { statement, type StatementScope } from '@q/schema/internal';
import type { Stamp } from '../types.js';
import { num, type Db } from './db.js';

export const retryStatement = statement('q_store_retry', `SELECT __q_schema__.q_retry($1, $2, $3, $4, $5, $6) AS n`);

/** Parks the request carrying `stamp` until `notBefore` with a new envelope; false when fenced. */
export async function retryRequest(
  scope: StatementScope,
  db: Db,
  owner: string,
  stamp: Stamp,
  notBefore: number,
  envelope: string,
): Promise<boolean> {
  const { rows } = await scope.run<{ n: string }>(db, retryStatement, [owner, stamp.id, stamp.token, stamp.attempt, notBefore, envelope]);
  return num(rows[0]?.n ?? 0) === 1;
}
