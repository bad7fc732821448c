import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

// Two-key advisory lock (class, schema): one maintenance runner per job table. The schema is the
// store's (a parameter), not the session's current_schema(): a store bound with `schema` may run
// on connections whose search_path names another.
const LOCK_CLASS = 0x71_6a_6f_62; // "qjob"

const SESSION = statement('q_jobs_maint_session_lock', `SELECT pg_try_advisory_lock($1::int, hashtext($2::text)) AS ok`);
const XACT = statement('q_jobs_maint_xact_lock', `SELECT pg_try_advisory_xact_lock($1::int, hashtext($2::text)) AS ok`);

/** Tries the session-level maintenance lock on a dedicated connection (held until it closes). */
export async function tryMaintenanceSessionLock(scope: StatementScope, db: Queryable): Promise<boolean> {
  const { rows } = await scope.run<{ ok: boolean }>(db, SESSION, [LOCK_CLASS, scope.schema]);
  return rows[0]?.ok === true;
}

/** Tries the maintenance lock for the current transaction. */
export async function tryMaintenanceXactLock(scope: StatementScope, db: Queryable): Promise<boolean> {
  const { rows } = await scope.run<{ ok: boolean }>(db, XACT, [LOCK_CLASS, scope.schema]);
  return rows[0]?.ok === true;
}
