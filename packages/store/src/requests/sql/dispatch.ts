import { statement, type StatementScope } from '@q/schema';
import type { Request } from '../types.js';
import { num, type Db } from './db.js';

export const dispatchStatement = statement(
  'q_store_dispatch',
  `SELECT id, request_token, queue, partition_id, deadline, dispatch_epoch, dispatch_attempt, cancelled, envelope, payload
  FROM __q_schema__.q_dispatch($1, $2, $3, $4) ORDER BY deadline, created_at`,
);

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

/** Stamps up to `limit` due pending requests of `owner`'s active partitions (see `__q_schema__.q_dispatch`). */
export async function dispatchRequests(
  scope: StatementScope,
  db: Db,
  owner: string,
  queue: string,
  nowSeconds: number,
  limit: number,
): Promise<Request[]> {
  const { rows } = await scope.run<Row>(db, dispatchStatement, [owner, queue, nowSeconds, limit]);
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
