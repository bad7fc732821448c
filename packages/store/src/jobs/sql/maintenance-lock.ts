import type { Queryable } from './db.js';

// Two-key advisory lock (class, schema): one maintenance runner per job table.
const LOCK_CLASS = 0x71_6a_6f_62; // "qjob"

const SESSION = `SELECT pg_try_advisory_lock($1::int, hashtext(current_schema())) AS ok`;
const XACT = `SELECT pg_try_advisory_xact_lock($1::int, hashtext(current_schema())) AS ok`;

/** Tries the session-level maintenance lock on a dedicated connection (held until it closes). */
export async function tryMaintenanceSessionLock(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ ok: boolean }>({ text: SESSION, values: [LOCK_CLASS] });
  return rows[0]?.ok === true;
}

/** Tries the maintenance lock for the current transaction. */
export async function tryMaintenanceXactLock(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ ok: boolean }>({ name: 'q_jobs_maint_xact_lock', text: XACT, values: [LOCK_CLASS] });
  return rows[0]?.ok === true;
}
