import type { HandlerFunc } from './job-types.js';
import { GiveUpError } from './handlers/give-up.js';

/**
 * Wraps an app handler for `Worker.register`. A {@link GiveUpError} must dead-letter the job at
 * once, but `@q/job-worker` has no "do not retry" error yet: its rule is "dead letter when
 * `attempt >= maxAttempts`" on the job object it handed to the handler, so the adapter sets that
 * attempt as the last one before rethrowing. (The stored `max_attempts` is unchanged.) The
 * webhook test's 410 case proves the effect end to end.
 */
export function adaptHandler(handler: HandlerFunc): HandlerFunc {
  return async (job, ctx) => {
    try {
      return await handler(job, ctx);
    } catch (err) {
      if (err instanceof GiveUpError) job.maxAttempts = Math.min(job.maxAttempts, job.attempt);
      throw err;
    }
  };
}
