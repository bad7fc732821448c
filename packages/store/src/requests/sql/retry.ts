import type { Stamp } from '../types.js';
import { run, type Db, type Statement } from './db.js';

export const retryStatement: Statement = {
  name: 'q_store_retry',
  text: `UPDATE async_requests r
   SET dispatch_epoch = 0, not_before = $5, envelope = $6
 WHERE r.id = $1 AND r.request_token = $2 AND r.dispatch_epoch > 0 AND r.dispatch_attempt = $3
   AND EXISTS (SELECT 1 FROM async_partitions p
                WHERE p.queue = r.queue AND p.partition_id = r.partition_id AND p.owner = $4)`,
};

/** Parks the request carrying `stamp` until `notBefore` with a new envelope; false when fenced. */
export async function retryRequest(db: Db, owner: string, stamp: Stamp, notBefore: number, envelope: string): Promise<boolean> {
  const res = await run(db, retryStatement, [stamp.id, stamp.token, stamp.attempt, owner, notBefore, envelope]);
  return res.rowCount === 1;
}
