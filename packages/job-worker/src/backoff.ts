import { invalidArgument } from '@q/schema';
import { RETRY_BASE_MS, RETRY_CAP_MS } from './constants.js';

/**
 * Delay before retrying a job whose attempt number `attempt` (counted from 1, as stored after
 * the lease) failed: `min(baseMs × 2^(attempt−1), 5 min) × U[0.8, 1.2)`. Computed in floating
 * point, so huge attempts saturate at the cap instead of overflowing. Milliseconds.
 */
export function retryBackoffMs(attempt: number, baseMs: number = RETRY_BASE_MS): number {
  if (typeof attempt !== 'number' || Number.isNaN(attempt)) throw invalidArgument('retryBackoffMs: attempt must be a number');
  if (typeof baseMs !== 'number' || !Number.isFinite(baseMs) || baseMs <= 0) {
    throw invalidArgument('retryBackoffMs: baseMs must be a positive number of milliseconds');
  }
  const exponent = Math.max(Math.floor(attempt) - 1, 0);
  const base = Math.min(baseMs * 2 ** exponent, RETRY_CAP_MS);
  return base * (0.8 + 0.4 * Math.random());
}
