import { statement, type StatementScope } from '@q/schema/internal';
import type { Key } from '../types.js';
import { type Db } from './db.js';

export const ackStatement = statement(
  'q_store_ack',
  `SELECT acked_id, acked_token FROM __q_schema__.q_ack($1, $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::bigint[], $8::int[], $9)`,
);

/** Distinct completions, column-wise, with their input positions. */
export interface AckRows {
  ids: string[];
  tokens: string[];
  attempts: number[];
  routes: string[];
  payloads: string[];
  expiresAt: number[];
  ords: number[];
}

/** Deletes the acked requests and writes their results in one statement; returns the acked keys. */
export async function ackRequests(scope: StatementScope, db: Db, owner: string, rows: AckRows, nowMs: number): Promise<Key[]> {
  const res = await scope.run<{ acked_id: string; acked_token: string }>(db, ackStatement, [
    owner,
    rows.ids,
    rows.tokens,
    rows.attempts,
    rows.routes,
    rows.payloads,
    rows.expiresAt,
    rows.ords,
    nowMs,
  ]);
  return res.rows.map((r) => ({ id: r.acked_id, token: r.acked_token }));
}
