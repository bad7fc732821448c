import type { JobStore } from '@q/store/jobs';
import type { Execution } from './execution.js';
import { errorFields, type Logger } from './logger.js';

/** What giving attempts back needs from their worker. */
export interface ReturnContext {
  store: JobStore;
  logger: Logger;
  workerId: string;
  /** Forgets an attempt (frees its slot if it held one). */
  settle(e: Execution): void;
}

/** How a give-back is logged: the level of success, and the two messages. */
export interface ReturnWords {
  level: 'info' | 'warn';
  returned: string;
  failed: string;
}

/**
 * Gives `left` (already marked released) back to the queue with one fenced release (the attempt
 * given back), logs how that went, and forgets them. A failed release leaves their leases to lapse.
 */
export async function returnToQueue(c: ReturnContext, left: readonly Execution[], words: ReturnWords): Promise<void> {
  try {
    const released = await c.store.release(left.map((e) => e.lease));
    c.logger[words.level]({ worker_id: c.workerId, released: released.length }, words.returned);
  } catch (err) {
    c.logger.error(errorFields(err), words.failed);
  }
  for (const e of left) c.settle(e);
}
