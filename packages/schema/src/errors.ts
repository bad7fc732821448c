/**
 * Stable error codes carried by every {@link QError}. Users branch on `err.code`, never on the
 * message text.
 */
export const QErrorCode = {
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
  UNSUPPORTED_DSN: 'UNSUPPORTED_DSN',
  SCHEMA_MISMATCH: 'SCHEMA_MISMATCH',
  QUOTA_HOLDER_LAPSED: 'QUOTA_HOLDER_LAPSED',
  UNKNOWN_QUEUE: 'UNKNOWN_QUEUE',
  DUPLICATE: 'DUPLICATE',
  INVALID_STATE: 'INVALID_STATE',
  NOT_FOUND: 'NOT_FOUND',
  CLOSED: 'CLOSED',
  CONNECTION: 'CONNECTION',
  /**
   * The database rolled the call back because a concurrent transaction conflicted with it (a
   * serialization failure `40001` or a deadlock `40P01`): nothing was done, and the same call
   * may simply be made again.
   */
  CONFLICT: 'CONFLICT',
  CONFIG: 'CONFIG',
  /** A wait the caller bounded (a `timeoutMs`) ended before what it waited for happened. */
  TIMEOUT: 'TIMEOUT',
  MIGRATION_FAILED: 'MIGRATION_FAILED',
} as const;

/** One of the stable {@link QErrorCode} strings. */
export type QErrorCode = (typeof QErrorCode)[keyof typeof QErrorCode];

/**
 * The base class of every error `q` throws. `code` is stable; `message` is for humans and never
 * contains a DSN password or a payload.
 */
export class QError extends Error {
  readonly code: QErrorCode;

  constructor(code: QErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'QError';
    this.code = code;
  }
}

/** Thrown by quota calls made on behalf of a holder whose lease lapsed, or that is unknown or deleted. */
export class QuotaHolderLapsedError extends QError {
  readonly holder: string;

  constructor(holder: string) {
    super(QErrorCode.QUOTA_HOLDER_LAPSED, `quota holder "${holder}" has lapsed or does not exist`);
    this.name = 'QuotaHolderLapsedError';
    this.holder = holder;
  }
}

/** Shorthand for `new QError('INVALID_ARGUMENT', message)`. */
export function invalidArgument(message: string): QError {
  return new QError(QErrorCode.INVALID_ARGUMENT, message);
}

/** True when `err` is a {@link QError}, optionally with the given code. */
export function isQError(err: unknown, code?: QErrorCode): err is QError {
  return err instanceof QError && (code === undefined || err.code === code);
}
