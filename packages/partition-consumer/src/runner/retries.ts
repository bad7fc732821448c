import { sleep } from './waker.js';

/** How a store call is retried: `attempts` tries, waiting `baseMs · 2^n` between them. */
export interface RetryPolicy {
  attempts: number;
  baseMs: number;
}

/** The runner's policy for outcome writes: 3 tries, 100 ms then 200 ms apart. */
export const STORE_RETRIES: RetryPolicy = { attempts: 3, baseMs: 100 };

/**
 * Calls `fn` until it resolves or `policy.attempts` calls failed; rethrows the last error.
 * `onRetry` is told about each failure that is retried.
 */
export async function withRetries<T>(
  fn: () => Promise<T>,
  policy: RetryPolicy,
  onRetry?: (err: unknown, attempt: number) => void,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= policy.attempts) throw err;
      onRetry?.(err, attempt);
      await sleep(policy.baseMs * 2 ** (attempt - 1));
    }
  }
}
