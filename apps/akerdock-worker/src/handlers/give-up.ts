import { DeadLetterError } from '@q/job-worker';

/**
 * Thrown by a handler when retrying cannot help (the receiver answered 410, the payload is
 * malformed, no signing secret is configured): the job goes to the dead letter at once instead
 * of burning its remaining attempts — the worker's {@link DeadLetterError} rule.
 */
export class GiveUpError extends DeadLetterError {
  constructor(message: string) {
    super(message);
    this.name = 'GiveUpError';
  }
}
