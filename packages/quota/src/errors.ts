import { QError, QErrorCode, isQError, redactDsn } from '@q/schema';

/**
 * Wraps a failure of a quota statement as a {@link QError}: a taken holder name is `DUPLICATE`,
 * anything else `CONNECTION` (the database could not do it). The message keeps Postgres' first
 * line — statements are parameterised, so it carries no values — with any DSN redacted.
 */
export function databaseError(operation: string, err: unknown): QError {
  if (isQError(err)) return err;
  const pgCode = (err as { code?: unknown } | null)?.code;
  const reason = redactDsn(err instanceof Error ? err.message : String(err));
  if (pgCode === '23505') return new QError(QErrorCode.DUPLICATE, `${operation}: the name is already taken`, { cause: err });
  return new QError(QErrorCode.CONNECTION, `${operation} failed: ${reason}`, { cause: err });
}

/** The `CLOSED` error of calls made after `close()`. */
export function closedError(what: string): QError {
  return new QError(QErrorCode.CLOSED, `${what} is closed`);
}
