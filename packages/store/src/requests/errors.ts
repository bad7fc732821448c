import { QError, QErrorCode } from '@q/schema';
import { type DatabaseErrorOptions } from '@q/schema/internal';

/** What a unique violation means for the request store: `databaseError`'s `DUPLICATE` message. */
export const DUPLICATE_REQUEST: DatabaseErrorOptions = { duplicate: 'a request with the same (id, token) already exists' };

/** The error of calls made after `close()`. */
export function closedError(): QError {
  return new QError(QErrorCode.CLOSED, 'store is closed');
}
