import { isQError } from '@q/schema';
import { configError, PURGE_SCHEDULE_NAME } from './config.js';
import type { JobQueueLike } from './job-types.js';
import type { Logger } from './logger.js';

/**
 * Makes the schedule {@link PURGE_SCHEDULE_NAME} match this process's `--purge-cron`: created or
 * replaced (an upsert that keeps the slot state when the pattern is unchanged, so every process
 * can run it at each start), or removed when the setting is off. Only a process that consumes the
 * `maintenance` queue touches it: the others neither run purges nor get a say in their cadence,
 * and would otherwise remove or recreate a schedule the maintenance workers own.
 *
 * Every worker's scheduler then enqueues one `maintenance.purge` per slot, fleet-wide. A pattern
 * the scheduler cannot read is a `CONFIG` error naming `--purge-cron` (exit 2).
 */
export async function applyPurgeSchedule(
  queue: Pick<JobQueueLike, 'schedule' | 'unschedule'>,
  cron: string | undefined,
  consumesMaintenance: boolean,
  log: Logger,
): Promise<void> {
  if (!consumesMaintenance) return;
  if (cron === undefined) {
    if (await queue.unschedule(PURGE_SCHEDULE_NAME)) log.info({ schedule: PURGE_SCHEDULE_NAME }, 'purge is off: schedule removed');
    return;
  }
  try {
    const s = await queue.schedule({ name: PURGE_SCHEDULE_NAME, cron, type: 'maintenance.purge', queue: 'maintenance' });
    log.debug({ schedule: s.name, cron: s.cron, next_fire_at: s.nextFireAt.toISOString() }, 'purge schedule set');
  } catch (err) {
    if (isQError(err, 'INVALID_ARGUMENT')) throw configError(`--purge-cron: ${err.message}`);
    throw err;
  }
}
