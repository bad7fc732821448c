import { QError, QErrorCode, isQError, redactDsn } from '@q/schema';

/**
 * Wraps a failed statement of `operation` as a {@link QError}: a duplicate key is `DUPLICATE`,
 * anything else `CONNECTION` (the database could not do it). Only Postgres' message is kept —
 * statements are parameterised and the DETAIL (which can quote values) is dropped, so no payload
 * reaches the message.
 */
export function databaseError(operation: string, err: unknown): QError {
  if (isQError(err)) return err;
  const pgCode = (err as { code?: unknown } | null)?.code;
  if (pgCode === '23505') {
    return new QError(QErrorCode.DUPLICATE, `${operation}: a request with the same (id, token) already exists`, { cause: err });
  }
  const reason = redactDsn(err instanceof Error ? err.message : String(err));
  return new QError(QErrorCode.CONNECTION, `${operation} failed: ${reason}`, { cause: err });
}

/** The error of calls made after `close()`. */
export function closedError(): QError {
  return new QError(QErrorCode.CLOSED, 'store is closed');
}
