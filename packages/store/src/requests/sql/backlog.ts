import { statement, type StatementScope } from '@q/schema/internal';
import { num, type Db } from './db.js';

// Each window is a range count on the pending index (deadline order), so the work is the depth
// plus the expiring rows, not depth × windows. A cancelled request keeps its row until a
// dispatcher answers it CANCELLED: it is counted apart, as it is no work waiting to be done.
export const backlogStatement = statement(
  'q_store_backlog',
  `SELECT (SELECT count(*) FROM __q_schema__.q_requests WHERE queue = $1 AND dispatch_epoch = 0 AND cancelled = 0) AS depth,
       (SELECT count(*) FROM __q_schema__.q_requests WHERE queue = $1 AND cancelled <> 0) AS cancelled,
       ARRAY(SELECT (SELECT count(*) FROM __q_schema__.q_requests r
                      WHERE r.queue = $1 AND r.dispatch_epoch = 0 AND r.cancelled = 0 AND r.deadline <= $2::bigint + w.secs)
               FROM unnest($3::bigint[]) WITH ORDINALITY AS w(secs, i)
              ORDER BY w.i) AS expiring`,
);

/** What {@link pendingBacklog} reads of one queue. */
export interface Backlog {
  /** Pending requests, cancelled ones not counted. */
  depth: number;
  /** Cancelled requests no dispatcher has answered yet (pending or in flight). */
  cancelled: number;
  /** Per window, the pending (not cancelled) requests with `deadline <= now + windows[i]`. */
  expiring: number[];
}

/** The backlog of `queue` at `nowSeconds`, see {@link Backlog}. */
export async function pendingBacklog(scope: StatementScope, db: Db, queue: string, nowSeconds: number, windows: number[]): Promise<Backlog> {
  const { rows } = await scope.run<{ depth: string; cancelled: string; expiring: string[] }>(db, backlogStatement, [queue, nowSeconds, windows]);
  const row = rows[0];
  return { depth: num(row?.depth ?? 0), cancelled: num(row?.cancelled ?? 0), expiring: (row?.expiring ?? []).map(num) };
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
