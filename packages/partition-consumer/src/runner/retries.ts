import { QErrorCode, classifyFailure, isQError } from '@q/schema';
import { sleep } from './waker.js';

/** How a store call is retried: `attempts` tries, waiting `baseMs · 2^n` between them. */
export interface RetryPolicy {
  attempts: number;
  baseMs: number;
}

/** The runner's policy for outcome writes: 3 tries, 100 ms then 200 ms apart. */
export const STORE_RETRIES: RetryPolicy = { attempts: 3, baseMs: 100 };

/**
 * Whether trying the same call again can succeed: only a `CONNECTION` error (the database could
 * not do it just now) that is not persistent, or a `CONFLICT` (rolled back for a concurrent
 * transaction). A permission error, a missing table or schema, a read-only server
 * (`classifyFailure`), bad input (`INVALID_ARGUMENT`), a closed store and anything else fail the
 * same way every time.
 */
export function isRetryable(err: unknown): boolean {
  return (isQError(err, QErrorCode.CONNECTION) && classifyFailure(err).kind !== 'persistent') || isQError(err, QErrorCode.CONFLICT);
}

/**
 * Calls `fn` until it resolves, `policy.attempts` calls failed, or one failed with an error that
 * is not {@link isRetryable}; rethrows the last error. `onRetry` is told about each failure that
 * is retried.
 */
export async function withRetries<T>(fn: () => Promise<T>, policy: RetryPolicy, onRetry?: (err: unknown, attempt: number) => void): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= policy.attempts || !isRetryable(err)) throw err;
      onRetry?.(err, attempt);
      await sleep(policy.baseMs * 2 ** (attempt - 1));
    }
  }
}
