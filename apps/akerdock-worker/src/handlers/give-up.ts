/**
 * Thrown by a handler when retrying cannot help (the receiver answered 410, the payload is
 * malformed, no signing secret is configured): the job goes to the dead letter at once instead
 * of burning its remaining attempts.
 */
export class GiveUpError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GiveUpError';
  }
}
