import { statement, textArrayLiteral, plainArrayLiteral, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

// The requests of a new flow's inference steps, on the request queue's table (the requests module,
// in this schema), and the links from their nodes (migration 0015), in one statement of the flow
// insert's transaction: the request exists iff the flow does.
const TEXT = `
WITH r AS (
  INSERT INTO __q_schema__.q_requests (id, request_token, queue, partition_id, deadline, envelope, payload, created_at)
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[], $7::bytea[], $8::bigint[])
)
INSERT INTO __q_schema__.q_flow_requests (job_id, request_id, request_token, deadline)
SELECT * FROM unnest($9::bigint[], $1::text[], $2::text[], $5::bigint[])`;

const STMT = statement('q_jobs_insert_flow_requests', TEXT);

/** The request rows of a flow's inference steps, column-wise, with their nodes' job ids. */
export interface FlowRequestRows {
  ids: string[];
  tokens: string[];
  queues: string[];
  partitions: number[];
  deadlines: number[];
  envelopes: string[];
  payloads: Buffer[];
  /** Submission order (the request queue's client microseconds). */
  createdAt: number[];
  jobIds: number[];
}

/** Inserts the requests and their nodes' links (see above). */
export async function insertFlowRequests(scope: StatementScope, db: Queryable, rows: FlowRequestRows): Promise<void> {
  await scope.run(db, STMT, [
    textArrayLiteral(rows.ids),
    textArrayLiteral(rows.tokens),
    textArrayLiteral(rows.queues),
    plainArrayLiteral(rows.partitions),
    plainArrayLiteral(rows.deadlines),
    textArrayLiteral(rows.envelopes),
    rows.payloads,
    plainArrayLiteral(rows.createdAt),
    plainArrayLiteral(rows.jobIds),
  ]);
}
