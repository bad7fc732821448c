import { QError, QErrorCode } from '@q/schema';

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
