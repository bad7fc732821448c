import { QError, QErrorCode } from '@q/schema';
import type { Job, NewJob } from './types.js';

/**
 * The new job that retries a dead-lettered one: its queue, type, payload, priority, maxAttempts,
 * lock key, group, team and resource, with `retryOfId` = its id (the dead letter itself stays).
 * A missing job is `NOT_FOUND`; one not in the dead letter is `INVALID_STATE`. Shared by
 * `JobQueue.retryDeadLetter` and the dashboard's retry action, so both retry the same way.
 */
export function deadLetterRetry(job: Job | null): NewJob {
  if (!job) throw new QError(QErrorCode.NOT_FOUND, 'job not found');
  if (job.status !== 'dead_letter') throw new QError(QErrorCode.INVALID_STATE, `only dead-letter jobs can be retried (job is ${job.status})`);
  return {
    queue: job.queue,
    type: job.type,
    payload: job.payload,
    priority: job.priority,
    maxAttempts: job.maxAttempts,
    ...(job.lockKey !== null ? { lockKey: job.lockKey } : {}),
    ...(job.group !== null ? { group: job.group } : {}),
    ...(job.teamId !== null ? { teamId: job.teamId } : {}),
    ...(job.resourceId !== null ? { resourceId: job.resourceId } : {}),
    retryOfId: job.id,
  };
}
