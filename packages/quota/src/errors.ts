import { QError, QErrorCode } from '@q/schema';

/** The `CLOSED` error of calls made after `close()`. */
export function closedError(what: string): QError {
  return new QError(QErrorCode.CLOSED, `${what} is closed`);
}
