import type { Job } from './types.js';

/**
 * The order jobs are claimed in, across queues: priority DESC, run_at, id — the order of the
 * dequeue index. The store sorts each claim's rows by it, and a worker keeps its local queue in it.
 */
export function claimOrder(a: Pick<Job, 'priority' | 'runAt' | 'id'>, b: Pick<Job, 'priority' | 'runAt' | 'id'>): number {
  return b.priority - a.priority || a.runAt.getTime() - b.runAt.getTime() || a.id - b.id;
}
