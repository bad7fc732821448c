import { redactDsn } from './dsn.js';
import { QError, QErrorCode, isQError } from './errors.js';

/** Options of {@link databaseError}. */
export interface DatabaseErrorOptions {
  /** What a unique violation means for this operation (the `DUPLICATE` message after the operation). */
  duplicate?: string;
}

/**
 * Wraps a failure of a database call of `operation` as a {@link QError}; a `QError` passes
 * through unchanged. The one mapping every store shares:
 *
 * - a unique violation (`23505`) is `DUPLICATE`;
 * - a data exception (SQLSTATE class `22`: a value out of range, a character the encoding cannot
 *   hold…) or a program limit (`54`) is `INVALID_ARGUMENT`: retrying cannot help. Its message keeps
 *   only Postgres' headline before the first `:` and the SQLSTATE, since the rest can quote the value;
 * - a statement too large for the driver to build (`RangeError: Invalid string length`) is
 *   `INVALID_ARGUMENT`;
 * - a serialization failure (`40001`) or a deadlock (`40P01`) is `CONFLICT`: the transaction was
 *   rolled back because of a concurrent one, and the same call may be made again at once (the
 *   connection is fine, so it is not `CONNECTION`);
 * - anything else (connection loss, lock or statement timeouts, a server shutting down…) is
 *   `CONNECTION`: the database could not do it now. Postgres' message is kept (statements are
 *   parameterised and the DETAIL, which can quote values, is dropped), with any DSN redacted.
 */
export function databaseError(operation: string, err: unknown, opts: DatabaseErrorOptions = {}): QError {
  if (isQError(err)) return err;
  const sqlState = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  if (sqlState === '23505') {
    return new QError(QErrorCode.DUPLICATE, `${operation}: ${opts.duplicate ?? 'a row with the same key already exists'}`, {
      cause: err,
    });
  }
  if (typeof sqlState === 'string' && /^(22|54)[0-9A-Z]{3}$/.test(sqlState)) {
    const headline = (message.split(':')[0] ?? message).trim();
    return new QError(QErrorCode.INVALID_ARGUMENT, `${operation}: ${headline} (SQLSTATE ${sqlState})`, { cause: err });
  }
  if (sqlState === '40001' || sqlState === '40P01') {
    const what = sqlState === '40001' ? 'serialization failure' : 'deadlock';
    return new QError(
      QErrorCode.CONFLICT,
      `${operation}: ${what} with a concurrent transaction, nothing was done: retry (SQLSTATE ${sqlState})`,
      {
        cause: err,
      },
    );
  }
  if (err instanceof RangeError && /invalid string length|array buffer allocation/i.test(message)) {
    return new QError(QErrorCode.INVALID_ARGUMENT, `${operation}: the statement is too large to send (${message})`, {
      cause: err,
    });
  }
  return new QError(QErrorCode.CONNECTION, `${operation} failed: ${redactDsn(message)}`, { cause: err });
}
