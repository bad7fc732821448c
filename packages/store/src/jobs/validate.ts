import { randomUUID } from 'node:crypto';
import { checkName, invalidArgument } from '@q/schema';
import { jsonText } from './json.js';
import { JOB_STATUSES, type JobStatus, type NewJob } from './types.js';
import type { EnqueueBatch } from './sql/enqueue-jobs.js';

const INT32_MIN = -2_147_483_648;
/** Largest 32-bit integer: also the longest lease (about 24.8 days, the longest Node timer). */
export const INT32_MAX = 2_147_483_647;
/** Longest delay or age accepted (retry backoff, purge age): 100 years, in milliseconds. */
export const MAX_DELAY_MS = 100 * 365.25 * 86_400_000;
// The instants a job's runAt may take: Postgres' timestamptz starts in 4713 BC, a JS Date ends in
// 275760; anything before year 1 is surely a mistake (and any past instant means "now" anyway).
const MIN_RUN_AT = new Date('0001-01-01T00:00:00.000Z').getTime();
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Default `maxAttempts` of a new job. */
export const DEFAULT_MAX_ATTEMPTS = 5;

/** Throws `INVALID_ARGUMENT` unless `uuid` is a UUID string. */
export function checkUuid(uuid: unknown, what = 'uuid'): string {
  if (typeof uuid !== 'string' || !UUID.test(uuid)) throw invalidArgument(`${what} must be a UUID string`);
  return uuid;
}

/** Throws `INVALID_ARGUMENT` unless `v` is a job status. */
export function checkStatus(v: unknown): JobStatus {
  if (typeof v !== 'string' || !(JOB_STATUSES as readonly string[]).includes(v)) {
    throw invalidArgument(`status must be one of ${JOB_STATUSES.join(', ')}`);
  }
  return v as JobStatus;
}

/** An optional key (idempotency, lock): absent, or a non-empty identifier of bounded length. */
function optKey(v: unknown, what: string): string | null {
  return v === undefined || v === null ? null : checkName('enqueue', what, v);
}

function optId(v: unknown, what: string): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw invalidArgument(`${what} must be a safe integer`);
  return v;
}

function int32(v: unknown, what: string, min = INT32_MIN): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > INT32_MAX) {
    throw invalidArgument(`${what} must be an integer between ${min} and ${INT32_MAX}`);
  }
  return v;
}

/**
 * Checks every job of a batch and turns it into statement columns, or throws `INVALID_ARGUMENT`
 * naming the first bad field (and its index in a batch) before anything is sent.
 */
export function toEnqueueBatch(jobs: readonly NewJob[]): EnqueueBatch {
  const b: EnqueueBatch = {
    uuids: [], queues: [], types: [], payloads: [], priorities: [], runAts: [], maxAttempts: [],
    idempotencyKeys: [], lockKeys: [], teamIds: [], resourceIds: [], retryOfIds: [], ids: [],
  };
  jobs.forEach((job, i) => {
    const at = jobs.length > 1 ? ` (job ${i})` : '';
    try {
      if (!job || typeof job !== 'object') throw invalidArgument('job must be an object');
      const queue = checkName('enqueue', 'queue', job.queue);
      const type = checkName('enqueue', 'type', job.type, { allowEmpty: true });
      const payload = job.payload === undefined || job.payload === null ? {} : job.payload;
      const json = jsonText(payload, 'payload', 'strict');
      if ('problem' in json) throw invalidArgument(json.problem);
      let runAt: Date | null = null;
      if (job.runAt !== undefined && job.runAt !== null) {
        if (!(job.runAt instanceof Date) || Number.isNaN(job.runAt.getTime())) throw invalidArgument('runAt must be a valid Date');
        if (job.runAt.getTime() < MIN_RUN_AT) throw invalidArgument('runAt must not be before the year 1');
        runAt = job.runAt;
      }
      b.uuids.push(randomUUID());
      b.queues.push(queue);
      b.types.push(type);
      b.payloads.push(json.text!);
      b.priorities.push(job.priority === undefined || job.priority === null ? 0 : int32(job.priority, 'priority'));
      b.runAts.push(runAt);
      b.maxAttempts.push(
        job.maxAttempts === undefined || job.maxAttempts === null ? DEFAULT_MAX_ATTEMPTS : int32(job.maxAttempts, 'maxAttempts', 1),
      );
      b.idempotencyKeys.push(optKey(job.idempotencyKey, 'idempotencyKey'));
      b.lockKeys.push(optKey(job.lockKey, 'lockKey'));
      b.teamIds.push(optId(job.teamId, 'teamId'));
      b.resourceIds.push(optId(job.resourceId, 'resourceId'));
      b.retryOfIds.push(optId(job.retryOfId, 'retryOfId'));
    } catch (err) {
      if (err instanceof Error && at) err.message += at;
      throw err;
    }
  });
  return b;
}
