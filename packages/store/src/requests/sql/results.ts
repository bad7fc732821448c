import { statement, type StatementScope } from '@q/schema/internal';
import type { Result } from '../types.js';
import { num, type Db } from './db.js';

export const popResultsStatement = statement(
  'q_store_pop_results',
  `SELECT seq, route, id, request_token, payload FROM __q_schema__.q_pop_results($1, $2, $3) ORDER BY seq`,
);

/** Deletes and returns up to `limit` live results of `route` in seq order, dropping expired ones it meets. */
export async function popRouteResults(scope: StatementScope, db: Db, route: string, nowSeconds: number, limit: number): Promise<Result[]> {
  const { rows } = await scope.run<{ seq: string; route: string; id: string; request_token: string; payload: string }>(db, popResultsStatement, [
    route,
    nowSeconds,
    limit,
  ]);
  return rows.map((r) => ({ seq: num(r.seq), route: r.route, id: r.id, token: r.request_token, payload: r.payload }));
}

// q_pop_results' order and expiry rule (seq order; a result whose TTL ended is not returned), so a
// peek shows what the next pop would return.
export const peekResultsStatement = statement(
  'q_store_peek_results',
  `SELECT seq, route, id, request_token, payload FROM __q_schema__.q_results
 WHERE route = $1 AND (expires_at = 0 OR expires_at >= $2)
 ORDER BY seq
 LIMIT $3`,
);

/** Up to `limit` live results of `route` in seq order, left in place. */
export async function peekRouteResults(scope: StatementScope, db: Db, route: string, nowSeconds: number, limit: number): Promise<Result[]> {
  const { rows } = await scope.run<{ seq: string; route: string; id: string; request_token: string; payload: string }>(db, peekResultsStatement, [
    route,
    nowSeconds,
    limit,
  ]);
  return rows.map((r) => ({ seq: num(r.seq), route: r.route, id: r.id, token: r.request_token, payload: r.payload }));
}

export const expireResultsStatement = statement(
  'q_store_expire_results',
  `DELETE FROM __q_schema__.q_results x
 WHERE x.ctid = ANY (ARRAY(SELECT e.ctid FROM __q_schema__.q_results e
                            WHERE e.expires_at > 0 AND e.expires_at < $1
                            LIMIT $2 FOR UPDATE SKIP LOCKED))`,
);

/** Deletes up to `limit` results of any route whose TTL ended before `nowSeconds`; returns how many. */
export async function expireAnyResults(scope: StatementScope, db: Db, nowSeconds: number, limit: number): Promise<number> {
  const res = await scope.run(db, expireResultsStatement, [nowSeconds, limit]);
  return res.rowCount ?? 0;
}

export const resultDepthStatement = statement('q_store_result_depth', `SELECT count(*) AS n FROM __q_schema__.q_results WHERE route = $1`);

/** Results waiting on `route` (including expired ones not yet deleted). */
export async function countResults(scope: StatementScope, db: Db, route: string): Promise<number> {
  const { rows } = await scope.run<{ n: string }>(db, resultDepthStatement, [route]);
  return num(rows[0]?.n ?? 0);
}
