import { num, run, type Db, type Statement } from './db.js';

// Each window is a range count on the pending index (deadline order), so the work is the depth
// plus the expiring rows, not depth × windows.
export const backlogStatement: Statement = {
  name: 'q_store_backlog',
  text: `SELECT (SELECT count(*) FROM async_requests WHERE queue = $1 AND dispatch_epoch = 0) AS depth,
       ARRAY(SELECT (SELECT count(*) FROM async_requests r
                      WHERE r.queue = $1 AND r.dispatch_epoch = 0 AND r.deadline <= $2::bigint + w.secs)
               FROM unnest($3::bigint[]) WITH ORDINALITY AS w(secs, i)
              ORDER BY w.i) AS expiring`,
};

/** Pending requests of `queue`, and how many of them have `deadline <= now + windows[i]`. */
export async function pendingBacklog(db: Db, queue: string, nowSeconds: number, windows: number[]): Promise<{ depth: number; expiring: number[] }> {
  const { rows } = await run<{ depth: string; expiring: string[] }>(db, backlogStatement, [queue, nowSeconds, windows]);
  const row = rows[0];
  return { depth: num(row?.depth ?? 0), expiring: (row?.expiring ?? []).map(num) };
}

export const hasRequestsStatement: Statement = {
  name: 'q_store_has_requests',
  text: `SELECT EXISTS (SELECT 1 FROM async_requests WHERE queue = $1 AND dispatch_epoch = 0) AS any`,
};

/** True when `queue` has a pending request. */
export async function anyPending(db: Db, queue: string): Promise<boolean> {
  const { rows } = await run<{ any: boolean }>(db, hasRequestsStatement, [queue]);
  return rows[0]?.any === true;
}
