import { invalidArgument } from '@q/schema';
import { checkName, statement, type StatementScope } from '@q/schema/internal';
import type pg from 'pg';
import { acquireLeaderLease, releaseLeaderLease, renewLeaderLease, type LeaseRow } from './sql/leader-lease.js';
import { robustRound, roundSteps, type MaintenanceFailure } from './ops/maintenance.js';
import type { ReapedJob } from './types.js';
import { INT32_MAX } from './validate.js';

/** The leadership of the job table's maintenance (reaping lapsed leases, promoting due jobs). */
export const MAINTENANCE_LEADERSHIP = 'jobs_maintenance';

/** A leadership held in `q_leader_leases` (see {@link JobStore.acquireLeadership}). */
export interface LeaderLease {
  /** The leadership's name (`jobs_maintenance` for the job maintenance). */
  readonly name: string;
  /** Who holds it (a worker id). */
  readonly owner: string;
  /** Fencing epoch: rises at every change of owner; writes fenced by it fail once it is stale. */
  readonly epoch: number;
  /** Until when it is held unless renewed (database clock). */
  readonly expiresAt: Date;
}

/** Result of {@link JobStore.maintainAsLeader}: what one fenced round did, and the renewed lease. */
export interface LeaderMaintenanceResult {
  lease: LeaderLease;
  reaped: ReapedJob[];
  promoted: number;
  /** Jobs the round could not reap or promote, dead-lettered with the error (see `MaintenanceResult.failed`). */
  failed: MaintenanceFailure[];
}

// The round's transaction ends the session of a holder that stops between its statements
// (SIGSTOP, a long GC pause): its uncommitted maintenance is rolled back and the lease row lock
// freed, so a takeover waits at most this long and a deposed leader's late writes never land.
const IDLE_TIMEOUT = statement('q_jobs_leader_idle_timeout', `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`);
// Floor of that timeout: a loaded event loop may pause a healthy holder for a few hundred ms.
const MIN_IDLE_TIMEOUT_MS = 1_000;

/** Checks a leadership call's arguments; returns the lease duration in whole milliseconds. */
export function checkLeadership(op: string, owner: unknown, ttlMs: unknown, name: unknown): number {
  checkName(op, 'owner', owner);
  checkName(op, 'leadership name', name);
  if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs < 1 || ttlMs > INT32_MAX) {
    throw invalidArgument(`${op}: ttlMs must be a positive number of milliseconds, at most ${INT32_MAX}`);
  }
  return Math.ceil(ttlMs);
}

/** Throws `INVALID_ARGUMENT` unless `lease` looks like a {@link LeaderLease}. */
export function checkLeaderLease(op: string, lease: LeaderLease): void {
  if (!lease || typeof lease !== 'object' || !Number.isSafeInteger(lease.epoch) || lease.epoch < 1) {
    throw invalidArgument(`${op}: lease must be a LeaderLease returned by acquireLeadership`);
  }
  checkName(op, 'owner', lease.owner);
  checkName(op, 'leadership name', lease.name);
}

function toLease(name: string, owner: string, row: LeaseRow | null): LeaderLease | null {
  return row ? { name, owner, epoch: Number(row.epoch), expiresAt: row.expires_at } : null;
}

/** See {@link JobStore.acquireLeadership}. */
export async function acquire(scope: StatementScope, pool: pg.Pool, name: string, owner: string, ttlMs: number): Promise<LeaderLease | null> {
  return toLease(name, owner, await acquireLeaderLease(scope, pool, name, owner, ttlMs));
}

/** See {@link JobStore.renewLeadership}. */
export async function renew(scope: StatementScope, pool: pg.Pool, lease: LeaderLease, ttlMs: number): Promise<LeaderLease | null> {
  return toLease(lease.name, lease.owner, await renewLeaderLease(scope, pool, lease.name, lease.owner, lease.epoch, ttlMs));
}

/** See {@link JobStore.releaseLeadership}. */
export function release(scope: StatementScope, pool: pg.Pool, lease: LeaderLease): Promise<boolean> {
  return releaseLeaderLease(scope, pool, lease.name, lease.owner, lease.epoch);
}

/** See {@link JobStore.maintainAsLeader}. */
export function maintainFenced(
  scope: StatementScope,
  pool: pg.Pool,
  channel: string,
  lease: LeaderLease,
  ttlMs: number,
  maxResumes: number,
): Promise<LeaderMaintenanceResult | null> {
  return robustRound(pool, async (client, careful) => {
    await scope.run(client, IDLE_TIMEOUT, [`${Math.max(ttlMs, MIN_IDLE_TIMEOUT_MS)}ms`]);
    const renewed = toLease(lease.name, lease.owner, await renewLeaderLease(scope, client, lease.name, lease.owner, lease.epoch, ttlMs));
    if (!renewed) return null;
    return { lease: renewed, ...(await roundSteps(scope, client, channel, maxResumes, careful)) };
  });
}
