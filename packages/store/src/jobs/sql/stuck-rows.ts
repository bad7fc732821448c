import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

// What a maintenance round isolates when its one-statement step fails on a row (see
// ops/maintenance.ts): the rows that step would write, oldest first, a bounded number per
// round, and the one write that takes a row out of the step's way for good.

const LAPSED = statement(
  'q_jobs_lapsed_ids',
  `SELECT id FROM __q_schema__.q_jobs WHERE status IN ('leased', 'running') AND lease_expires_at < now() ORDER BY lease_expires_at LIMIT $1`,
);
const DUE = statement(
  'q_jobs_due_ids',
  `SELECT id FROM __q_schema__.q_jobs WHERE status IN ('scheduled', 'retry_wait') AND run_at <= now() ORDER BY run_at LIMIT $1`,
);

// The archive trigger (migration 0006) moves the row out of the hot table and its indexes. The
// status is checked again: the row is dead-lettered only if it still waits for the failed step.
const DEAD_LETTER = statement(
  'q_jobs_dead_letter_stuck',
  `UPDATE __q_schema__.q_jobs SET status = 'dead_letter', dead_lettered_at = now(), finished_at = now(), last_error = $2,
     leased_by = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
   WHERE id = $1 AND status = ANY($3::__q_schema__.q_job_status[])
   RETURNING uuid`,
);

/** Which step of a maintenance round. */
export type MaintenanceStep = 'reap' | 'promote';

/** Ids of the rows `step` would write now, at most `limit`, oldest first. */
export async function stepCandidates(scope: StatementScope, db: Queryable, step: MaintenanceStep, limit: number): Promise<number[]> {
  const { rows } = await scope.run<{ id: string }>(db, step === 'reap' ? LAPSED : DUE, [limit]);
  return rows.map((r) => Number(r.id));
}

/** Dead-letters job `id` with `error` if it still waits for `step`; returns its uuid, or null. */
export async function deadLetterStuck(
  scope: StatementScope,
  db: Queryable,
  step: MaintenanceStep,
  id: number,
  error: string,
): Promise<string | null> {
  const statuses = step === 'reap' ? ['leased', 'running'] : ['scheduled', 'retry_wait'];
  const { rows } = await scope.run<{ uuid: string }>(db, DEAD_LETTER, [id, error, statuses]);
  return rows[0]?.uuid ?? null;
}
