import { statement, type StatementScope } from '@q/schema/internal';
import type { Key } from '../types.js';
import { type Db } from './db.js';

export const cancelStatement = statement(
  'q_store_cancel',
  `UPDATE __q_schema__.q_requests SET cancelled = 1 WHERE id = ANY ($1::text[]) AND cancelled = 0 RETURNING id`,
);

/** Marks every stored generation of `ids` cancelled; returns the ids it changed, once each. */
export async function cancelRequests(scope: StatementScope, db: Db, ids: string[]): Promise<string[]> {
  const { rows } = await scope.run<{ id: string }>(db, cancelStatement, [ids]);
  return [...new Set(rows.map((r) => r.id))];
}

export const cancelledKeysStatement = statement(
  'q_store_cancelled_keys',
  `SELECT cancelled_id, cancelled_token FROM __q_schema__.q_cancelled_keys($1::text[], $2::text[])`,
);

/** The subset of (distinct) `keys` whose request is cancelled. */
export async function selectCancelledKeys(scope: StatementScope, db: Db, keys: Key[]): Promise<Key[]> {
  const { rows } = await scope.run<{ cancelled_id: string; cancelled_token: string }>(db, cancelledKeysStatement, [
    keys.map((k) => k.id),
    keys.map((k) => k.token),
  ]);
  return rows.map((r) => ({ id: r.cancelled_id, token: r.cancelled_token }));
}
