import { QError, QErrorCode, invalidArgument } from '@q/schema';
import { onlyRow } from '@q/schema/internal';
import type { JobStore } from '@q/store';
import { deadLetterRetry } from '@q/store/jobs';

/** The actions a dashboard can run: on a job (by `uuid`), or on a schedule (by `name`). */
export const ACTIONS = ['cancel', 'retry', 'forget', 'pause-schedule', 'resume-schedule'] as const;
/** One of {@link ACTIONS}. */
export type ActionName = (typeof ACTIONS)[number];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What an action did, as shown to the user. */
export interface ActionResult {
  message: string;
  /** The job the user should look at next (the new job of a retry). */
  uuid?: string;
}

/** What an action request's JSON body may carry. */
export interface ActionBody {
  uuid?: unknown;
  name?: unknown;
}

/** Pauses or resumes the schedule `name`; an unknown one is `NOT_FOUND`. */
async function scheduleAction(store: JobStore, action: 'pause-schedule' | 'resume-schedule', name: unknown): Promise<ActionResult> {
  if (typeof name !== 'string' || name === '') throw invalidArgument(`${action}: name must be a schedule name`);
  // The dashboard has no cron parser: it resumes at now, and the next scheduler tick enqueues no
  // slot before that and moves the schedule to its pattern's next slot.
  const s = action === 'pause-schedule' ? await store.pauseSchedule(name) : await store.resumeSchedule(name, () => new Date());
  if (s === null) throw new QError(QErrorCode.NOT_FOUND, 'schedule not found');
  return { message: action === 'pause-schedule' ? `paused ${s.name}` : `resumed ${s.name}` };
}

/**
 * Runs `action`: on the job `body.uuid` (a bad uuid is `INVALID_ARGUMENT`, a job in the wrong
 * state `INVALID_STATE`) or on the schedule `body.name`.
 */
export async function runAction(store: JobStore, action: ActionName, body: ActionBody): Promise<ActionResult> {
  if (action === 'pause-schedule' || action === 'resume-schedule') return scheduleAction(store, action, body.name);
  const uuid = body.uuid;
  if (typeof uuid !== 'string' || !UUID.test(uuid)) throw invalidArgument(`${action}: uuid must be a job uuid`);
  switch (action) {
    case 'cancel': {
      const outcome = await store.cancel(uuid);
      if (outcome === 'cancelled') return { message: 'cancelled', uuid };
      if (outcome === 'cancel_requested') return { message: 'cancel requested: the worker stops the handler', uuid };
      throw new QError(QErrorCode.INVALID_STATE, 'nothing to cancel: the job is missing or finished');
    }
    case 'forget': {
      if (await store.forgetDeadLetter(uuid)) return { message: 'forgotten: the dead letter is now cancelled', uuid };
      throw new QError(QErrorCode.INVALID_STATE, 'only a dead-letter job can be forgotten');
    }
    case 'retry': {
      // As JobQueue.retryDeadLetter does: the dead letter stays, a new job carries retryOfId.
      const created = onlyRow(await store.enqueue([deadLetterRetry(await store.get(uuid))]), 'retry');
      return { message: `retried as job ${created.id}`, uuid: created.uuid };
    }
  }
}
