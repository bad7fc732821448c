import { statement, type StatementScope } from '@q/schema/internal';
import { type Db } from './db.js';

/** Rows per INSERT: one statement per chunk, all chunks in one transaction. */
export const ENQUEUE_CHUNK = 1000;

export const enqueueStatement = statement(
  'q_store_enqueue',
  `INSERT INTO __q_schema__.q_requests (id, request_token, queue, partition_id, deadline, envelope, payload, created_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[], $7::bytea[], $8::bigint[])`,
);

/** One chunk of new rows, column-wise. */
export interface EnqueueRows {
  ids: string[];
  tokens: string[];
  queues: string[];
  partitions: number[];
  deadlines: number[];
  envelopes: string[];
  payloads: Buffer[];
  /** Submission order: client microseconds plus the index in the batch. */
  createdAt: number[];
}

export async function insertRequests(scope: StatementScope, db: Db, rows: EnqueueRows): Promise<void> {
  await scope.run(db, enqueueStatement, [
    rows.ids,
    rows.tokens,
    rows.queues,
    rows.partitions,
    rows.deadlines,
    rows.envelopes,
    rows.payloads,
    rows.createdAt,
  ]);
}
