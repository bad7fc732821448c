import type { JobQueueLike } from './job-types.js';
import type { Logger } from './logger.js';
import { PURGE_LOCK_KEY } from './handlers/purge.js';

/**
 * Enqueues `maintenance.purge` now and then every `intervalMs`. Every worker process runs this;
 * the idempotency key names the interval slot, so all processes together enqueue one job per
 * slot, and the lock key lets only one purge run at a time even if slots overlap.
 */
export function startPurgeScheduler(queue: Pick<JobQueueLike, 'enqueue'>, intervalMs: number, log: Logger): { stop(): void } {
  const tick = async () => {
    const slot = Math.floor(Date.now() / intervalMs);
    try {
      const job = await queue.enqueue({
        queue: 'maintenance',
        type: 'maintenance.purge',
        lockKey: PURGE_LOCK_KEY,
        idempotencyKey: `maintenance.purge:${intervalMs}:${slot}`,
      });
      log.debug({ job_uuid: job.uuid, slot }, 'maintenance.purge scheduled');
    } catch (err) {
      log.warn({ err }, 'could not schedule maintenance.purge');
    }
  };
  void tick();
  const timer = setInterval(() => void tick(), intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
