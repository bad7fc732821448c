import { QError, QErrorCode, invalidArgument } from '@q/schema';

/** Why a handler's `signal` was aborted. */
export type JobAbortCause =
  /** Another owner holds the job now (the lease lapsed and was reaped): stop, nothing will be recorded. */
  | 'lease_lost'
  /** `JobQueue.cancel` was called: stop; the job ends `cancelled`. */
  | 'cancelled'
  /** The worker's drain timed out: stop; the job goes back to the queue. */
  | 'shutdown';

/** The `reason` of an aborted handler signal. */
export class JobAbortedError extends QError {
  readonly reason: JobAbortCause;

  constructor(cause: JobAbortCause) {
    super(QErrorCode.INVALID_STATE, `job aborted: ${cause.replace('_', ' ')}`);
    this.name = 'JobAbortedError';
    this.reason = cause;
  }
}

/**
 * Thrown by a handler when retrying cannot help (a malformed payload, a receiver that answered
 * 410): the job goes to the dead letter at once, whatever its attempt count, with `last_error`
 * set to the message. Subclass it for domain-specific "give up" errors.
 */
export class DeadLetterError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DeadLetterError';
  }
}

/** Longest snooze accepted: 100 years, in milliseconds (the store's bound on delays). */
export const MAX_SNOOZE_MS = 100 * 365.25 * 86_400_000;

/** Throws `INVALID_ARGUMENT` unless `delayMs` is a finite number of milliseconds from 0 to {@link MAX_SNOOZE_MS}. */
export function checkSnoozeMs(op: string, delayMs: unknown): number {
  if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0 || delayMs > MAX_SNOOZE_MS) {
    throw invalidArgument(`${op}: delayMs must be a non-negative number of milliseconds, at most 100 years`);
  }
  return delayMs;
}

/**
 * Thrown by a handler (or by `ctx.snooze`, which throws it) to snooze its job: the job goes back
 * to waiting for `delayMs` and runs again then, without using an attempt (River's `JobSnooze`,
 * BullMQ's `moveToDelayed`). The worker's `maxSnoozes` (default 100) bounds the snoozes of a job:
 * past it the job is dead-lettered (`snoozed more than N times`). A cancel requested meanwhile
 * wins. `delayMs` must be finite, from 0 to 100 years, else the constructor throws a `QError`
 * `INVALID_ARGUMENT` (and the attempt fails with it, as with any error a handler throws).
 */
export class JobSnoozeError extends Error {
  /** How long the job waits before it may run again (milliseconds). */
  readonly delayMs: number;

  constructor(delayMs: number) {
    super(`job snoozed for ${String(checkSnoozeMs('JobSnoozeError', delayMs))} ms`);
    this.name = 'JobSnoozeError';
    this.delayMs = delayMs;
  }
}
