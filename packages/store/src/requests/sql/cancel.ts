import type { Key } from '../types.js';
import { run, type Db, type Statement } from './db.js';

export const cancelStatement: Statement = {
  name: 'q_store_cancel',
  text: `UPDATE async_requests SET cancelled = 1 WHERE id = ANY ($1::text[]) AND cancelled = 0 RETURNING id`,
};

/** Marks every stored generation of `ids` cancelled; returns the ids it changed, once each. */
export async function cancelRequests(db: Db, ids: string[]): Promise<string[]> {
  const { rows } = await run<{ id: string }>(db, cancelStatement, [ids]);
  return [...new Set(rows.map((r) => r.id))];
}

export const cancelledKeysStatement: Statement = {
  name: 'q_store_cancelled_keys',
  text: `SELECT cancelled_id, cancelled_token FROM async_cancelled_keys($1::text[], $2::text[])`,
};

/** The subset of (distinct) `keys` whose request is cancelled. */
export async function selectCancelledKeys(db: Db, keys: Key[]): Promise<Key[]> {
  const { rows } = await run<{ cancelled_id: string; cancelled_token: string }>(db, cancelledKeysStatement, [
    keys.map((k) => k.id), keys.map((k) => k.token),
  ]);
  return rows.map((r) => ({ id: r.cancelled_id, token: r.cancelled_token }));
}
