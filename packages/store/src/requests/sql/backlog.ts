import { statement, type StatementScope } from '@q/schema';
import { num, type Db } from './db.js';

// Each window is a range count on the pending index (deadline order), so the work is the depth
// plus the expiring rows, not depth × windows.
export const backlogStatement = statement(
  'q_store_backlog',
  `SELECT (SELECT count(*) FROM __q_schema__.q_requests WHERE queue = $1 AND dispatch_epoch = 0) AS depth,
       ARRAY(SELECT (SELECT count(*) FROM __q_schema__.q_requests r
                      WHERE r.queue = $1 AND r.dispatch_epoch = 0 AND r.deadline <= $2::bigint + w.secs)
               FROM unnest($3::bigint[]) WITH ORDINALITY AS w(secs, i)
              ORDER BY w.i) AS expiring`,
);

/** Pending requests of `queue`, and how many of them have `deadline <= now + windows[i]`. */
export async function pendingBacklog(
  scope: StatementScope,
  db: Db,
  queue: string,
  nowSeconds: number,
  windows: number[],
): Promise<{ depth: number; expiring: number[] }> {
  const { rows } = await scope.run<{ depth: string; expiring: string[] }>(db, backlogStatement, [queue, nowSeconds, windows]);
  const row = rows[0];
  return { depth: num(row?.depth ?? 0), expiring: (row?.expiring ?? []).map(num) };
}

export const hasRequestsStatement = statement(
  'q_store_has_requests',
  `SELECT EXISTS (SELECT 1 FROM __q_schema__.q_requests WHERE queue = $1 AND dispatch_epoch = 0) AS any`,
);

/** True when `queue` has a pending request. */
export async function anyPending(scope: StatementScope, db: Db, queue: string): Promise<boolean> {
  const { rows } = await scope.run<{ any: boolean }>(db, hasRequestsStatement, [queue]);
  return rows[0]?.any === true;
}
