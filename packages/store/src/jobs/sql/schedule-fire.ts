import { statement, type StatementScope } from '@q/schema/internal';
import { MAX_NOTIFY_QUEUE_BYTES, type Queryable } from './db.js';
import { NEXT_JOB_ID } from './draw-job-ids.js';

// Fires due schedules: for each, a compare-and-set on what the caller read (next_fire_at, and the
// pattern, time zone and backfill its slots were computed from) advances next_fire_at and
// last_slot, and the slots' jobs are inserted in the same statement, so they exist iff the row
// advanced. Rows another worker is firing right now are skipped (SKIP LOCKED), not waited for:
// once it commits they no longer match. A row that changed since the caller read it (fired by
// another worker, its pattern replaced, deleted) matches nothing, and its jobs are not inserted.
//
// The job's fields come from the row as it is now, so a changed payload or type applies from the
// next slot. Each job's payload is the schedule's with the slot added as "scheduledFor", and its
// idempotency key is derived from the name and the slot (second fence: the insert trigger skips
// a row whose key is held). Jobs are inserted in the order given (oldest slot first), their ids
// drawn after the sort, so a backfill is claimed oldest first.
const TEXT = `
WITH d AS (
  SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::int8[], $6::timestamptz[], $7::timestamptz[])
    AS d(name, expected, cron, timezone, backfill_ms, next_fire_at, last_slot)
), locked AS (
  SELECT s.name FROM __q_schema__.q_schedules s JOIN d ON s.name = d.name
  WHERE s.paused_at IS NULL AND s.next_fire_at = d.expected AND s.cron = d.cron AND s.timezone = d.timezone AND s.backfill_ms IS NOT DISTINCT FROM d.backfill_ms
  ORDER BY s.name
  FOR UPDATE OF s SKIP LOCKED
), adv AS (
  UPDATE __q_schema__.q_schedules s SET next_fire_at = d.next_fire_at, last_slot = coalesce(d.last_slot, s.last_slot)
  FROM d WHERE s.name = d.name AND s.name IN (SELECT name FROM locked)
  RETURNING s.name, s.queue, s.job_type, s.payload, s.priority, s.max_attempts, s.job_group
), jobs AS MATERIALIZED (
  SELECT adv.queue, adv.job_type, adv.payload || jsonb_build_object('scheduledFor', k.slot) AS payload, adv.priority, adv.max_attempts, adv.job_group,
         k.key, k.ord
  FROM unnest($8::text[], $9::text[], $10::text[]) WITH ORDINALITY AS k(name, slot, key, ord) JOIN adv ON adv.name = k.name
), ins AS (
  INSERT INTO __q_schema__.q_jobs AS j (id, uuid, queue, job_type, payload, priority, run_at, status, max_attempts, idempotency_key, job_group)
  OVERRIDING SYSTEM VALUE
  SELECT x.id, __q_schema__.q_job_uuid(x.id, gen_random_uuid()), x.queue, x.job_type, x.payload, x.priority, now(),
         'queued'::__q_schema__.q_job_status, x.max_attempts, x.key, x.job_group
  FROM (SELECT jobs.*, ${NEXT_JOB_ID} AS id FROM jobs ORDER BY jobs.ord) x
  RETURNING j.queue
)
SELECT (SELECT coalesce(array_agg(name ORDER BY name), '{}') FROM adv) AS fired, (SELECT count(*)::int FROM ins) AS enqueued,
       (SELECT count(*)::int FROM (SELECT pg_notify($11, 'q:' || u.queue)
                                   FROM (SELECT DISTINCT queue FROM ins) u WHERE octet_length(u.queue) < ${MAX_NOTIFY_QUEUE_BYTES}) n) AS notified`;

const TEXT_STMT = statement('q_jobs_schedule_fire', TEXT);

/** One due schedule to fire: what the caller read, where it advances to, and the slots it enqueues. */
export interface ScheduleFiring {
  name: string;
  /** The row's `next_fire_at` as read: the compare-and-set's expected value. */
  expectedNextFireAt: Date;
  cron: string;
  timezone: string;
  backfillMs: number | null;
  /** The first slot not enqueued by this firing. */
  nextFireAt: Date;
  /** The slots to enqueue, oldest first (none: the row only moves on). */
  slots: Date[];
  /** One idempotency key per slot. */
  keys: string[];
}

/** What a fire statement did: the schedules it advanced (by name) and the jobs it inserted. */
export interface FireResult {
  fired: string[];
  enqueued: number;
}

/** Fires `firings` in one statement (see above). */
export async function fireSchedules(
  scope: StatementScope,
  db: Queryable,
  firings: readonly ScheduleFiring[],
  channel: string,
): Promise<FireResult> {
  const jobNames: string[] = [];
  const jobSlots: string[] = [];
  const jobKeys: string[] = [];
  for (const f of firings) {
    f.slots.forEach((slot, i) => {
      jobNames.push(f.name);
      jobSlots.push(slot.toISOString());
      jobKeys.push(f.keys[i] as string);
    });
  }
  const { rows } = await scope.run<{ fired: string[]; enqueued: number }>(db, TEXT_STMT, [
    firings.map((f) => f.name),
    firings.map((f) => f.expectedNextFireAt),
    firings.map((f) => f.cron),
    firings.map((f) => f.timezone),
    firings.map((f) => f.backfillMs),
    firings.map((f) => f.nextFireAt),
    firings.map((f) => f.slots[f.slots.length - 1] ?? null),
    jobNames,
    jobSlots,
    jobKeys,
    channel,
  ]);
  const r = rows[0];
  return { fired: r?.fired ?? [], enqueued: r?.enqueued ?? 0 };
}
