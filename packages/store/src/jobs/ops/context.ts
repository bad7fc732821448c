// What the operation modules under ops/ share with the store facade: its connection, statement
// scope and channel, the traced `op` wrapper (see ../../operation.ts), and the classification of the errors they retry.
import { QError, QErrorCode, invalidArgument } from '@q/schema';
import type { StatementScope } from '@q/schema/internal';
import type pg from 'pg';
import type { ClaimStarts } from '../claim-starts.js';
import type { GroupClaims } from '../group-claims.js';

/** What an operation of the job store needs from it. */
export interface JobStoreContext {
  readonly pool: pg.Pool;
  readonly scope: StatementScope;
  /** Where each queue's next claim starts reading it (see claim-starts.ts). */
  readonly starts: ClaimStarts;
  /** Which claims interleave groups and hold limits, and where their walks of groups are (see group-claims.ts). */
  readonly groups: GroupClaims;
  /** The LISTEN/NOTIFY channel that statements waking workers notify. */
  readonly channel: string;
  /** Whether `close()` has begun: a claim that returns after it gives its jobs back itself. */
  closed(): boolean;
  /** Runs `fn` as operation `name`: traced, and every failure a `QError` (`CLOSED` once closed). */
  op<T>(name: string, fn: () => Promise<T>, attributes?: Record<string, string | number | boolean>): Promise<T>;
  /**
   * `op` for an operation that can put jobs back in their queues behind the claims' start
   * positions (a release, a reap, a promotion, a snooze): when `putBack(result)` says it did,
   * every position is forgotten. The one place that invalidates them (see claim-starts.ts).
   */
  opPuttingBack<T>(name: string, fn: () => Promise<T>, putBack: (result: T) => boolean): Promise<T>;
}

/** A lock-key race (two claimers saw one key free) is retried at once, this many times. */
export const CLAIM_RACE_RETRIES = 8;
const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';
const LOCK_KEY_INDEX = 'q_jobs_lock_key_active_key';
/** The fence of per-group concurrency slots (migration 0011): lost like a lock key, retried like one. */
const LIMIT_SLOT_INDEX = 'q_jobs_limit_slot_key';

/** The error of any call on a closed store. */
export function closedError(): QError {
  return new QError(QErrorCode.CLOSED, 'the job store is closed');
}

/** Whether `err` is a lock-key or limit-slot race lost to another claimer (safe to retry at once). */
export function isLockKeyRace(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === UNIQUE_VIOLATION && (e.constraint === LOCK_KEY_INDEX || e.constraint === LIMIT_SLOT_INDEX);
}

/** An enqueue's `retryOfId` naming no job is the caller's mistake, not a database failure. */
export function mapWriteError(err: unknown): unknown {
  const e = err as { code?: string; constraint?: string };
  if (e?.code === FOREIGN_KEY_VIOLATION) {
    return invalidArgument('retryOfId refers to a job that does not exist');
  }
  return err;
}
