import { statement, type StatementScope } from '@q/schema/internal';
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

// The due pending rows that can be answered without an endpoint call (deadline passed, or
// cancelled), stamped exactly as q_dispatch stamps: the same partitions, epoch and attempt
// sequence, earliest deadline first. A plain statement, not a function, so no migration is needed;
// the cancelled test reads every due pending row of the owner's partitions (no index covers it),
// which is why callers run it only while their gate keeps the ordinary dispatch shut.
export const dispatchAnswerableStatement = statement(
  'q_store_dispatch_answerable',
  `WITH picked AS MATERIALIZED (
     SELECT r.ctid AS rid
       FROM __q_schema__.q_requests r
      WHERE r.queue = $2 AND r.dispatch_epoch = 0 AND r.not_before <= $3 AND (r.deadline <= $3 OR r.cancelled <> 0)
        AND r.partition_id = ANY (ARRAY(
              SELECT p.partition_id FROM __q_schema__.q_partitions p
               WHERE p.queue = $2 AND p.owner = $1 AND p.draining = 0))
      ORDER BY r.deadline, r.created_at
      LIMIT $4
        FOR UPDATE OF r SKIP LOCKED
   ), stamped AS (
     UPDATE __q_schema__.q_requests r
        SET dispatch_epoch = p.epoch, dispatch_attempt = nextval('__q_schema__.q_dispatch_attempts'::regclass)
       FROM __q_schema__.q_partitions p
      WHERE r.ctid = ANY (ARRAY(SELECT rid FROM picked))
        AND p.queue = r.queue AND p.partition_id = r.partition_id AND p.owner = $1 AND p.draining = 0
     RETURNING r.*
   )
   SELECT id, request_token, queue, partition_id, deadline, dispatch_epoch, dispatch_attempt, cancelled, envelope, payload
     FROM stamped ORDER BY deadline, created_at`,
);

/** Stamps up to `limit` due pending requests of `owner`'s active partitions (see `__q_schema__.q_dispatch`). */
export async function dispatchRequests(
  scope: StatementScope,
  db: Db,
  owner: string,
  queue: string,
  nowSeconds: number,
  limit: number,
  answerableOnly = false,
): Promise<Request[]> {
  const { rows } = await scope.run<Row>(db, answerableOnly ? dispatchAnswerableStatement : dispatchStatement, [owner, queue, nowSeconds, limit]);
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
