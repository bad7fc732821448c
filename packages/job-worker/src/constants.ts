/** Default job lease: an unfinished job is taken back this long after its last heartbeat. */
export const LEASE_DURATION_MS = 90_000;

/** First retry delay; it doubles at each attempt. */
export const RETRY_BASE_MS = 5_000;

/** Upper bound of the retry delay before jitter. */
export const RETRY_CAP_MS = 5 * 60_000;

/**
 * The reference worker's logical queues (see docs/design/jobs.md#known-queues).
 *
 * @deprecated The list belongs to the reference worker: use `KNOWN_QUEUES` of
 * `@q/akerdock-worker`, or give `JobQueue` your own `knownQueues`. Kept so existing imports work.
 */
export const KNOWN_QUEUES: readonly string[] = Object.freeze([
  'default',
  'deploy',
  'backup',
  'cleanup',
  'notify',
  'maintenance',
  'webhook',
  'task',
]);
