import type { Statement, StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

/** A lease a statement kept (its token matched), with the job's cancel flag. */
export interface HeldLeaseRow {
  id: string;
  cancel_requested: boolean;
}

/**
 * Runs a statement over leases given as `$1` ids and `$2` tokens (and `extra` from `$3`) that
 * returns the leases it kept with their cancel flag: the shape of the heartbeat and of
 * mark-running, each fenced by the token in its own WHERE.
 */
export async function runOnLeases(
  scope: StatementScope,
  db: Queryable,
  stmt: Statement,
  ids: number[],
  tokens: string[],
  ...extra: unknown[]
): Promise<HeldLeaseRow[]> {
  const { rows } = await scope.run<HeldLeaseRow>(db, stmt, [ids, tokens, ...extra]);
  return rows;
}
