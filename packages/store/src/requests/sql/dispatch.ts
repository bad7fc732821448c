import type { Request } from '../types.js';
import { num, run, type Db, type Statement } from './db.js';

export const dispatchStatement: Statement = {
  name: 'q_store_dispatch',
  text: `SELECT id, request_token, queue, partition_id, deadline, dispatch_epoch, dispatch_attempt, cancelled, envelope, payload
  FROM async_dispatch($1, $2, $3, $4) ORDER BY deadline, created_at`,
};

interface Row {
  id: string;
  request_token: string;
  queue: string;
  partition_id: number;
  deadline: string;
  dispatch_epoch: string;
  dispatch_attempt: string;
  cancelled: number;
  envelope: string;
  payload: Buffer;
}

/** Stamps up to `limit` due pending requests of `owner`'s active partitions (see `async_dispatch`). */
export async function dispatchRequests(db: Db, owner: string, queue: string, nowSeconds: number, limit: number): Promise<Request[]> {
  const { rows } = await run<Row>(db, dispatchStatement, [owner, queue, nowSeconds, limit]);
  return rows.map((r) => ({
    id: r.id,
    token: r.request_token,
    queue: r.queue,
    partition: r.partition_id,
    deadline: num(r.deadline),
    epoch: num(r.dispatch_epoch),
    attempt: num(r.dispatch_attempt),
    cancelled: r.cancelled !== 0,
    envelope: r.envelope,
    payload: r.payload,
  }));
}
