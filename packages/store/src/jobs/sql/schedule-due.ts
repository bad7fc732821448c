import { statement, type StatementScope } from '@q/schema/internal';
import type { Queryable } from './db.js';

// A scheduler's tick: the schedules due at `now` (the caller's clock $1, or the database's when
// null), earliest first, and the earliest next fire time of all schedules, so the caller can sleep
// until then. Both read q_schedules_next_fire_at_idx: with nothing due, one index probe and one
// index endpoint, however many schedules there are. The index holds only the schedules that are not
// paused (migration 0015), so a paused one is never due.
const TEXT = `
SELECT n.now, (SELECT min(next_fire_at) FROM __q_schema__.q_schedules WHERE paused_at IS NULL) AS next_at,
       s.name, s.cron, s.timezone, s.backfill_ms::float8 AS backfill_ms, s.next_fire_at, s.last_slot
FROM (SELECT coalesce($1::timestamptz, now()) AS now) n
LEFT JOIN LATERAL (SELECT * FROM __q_schema__.q_schedules WHERE paused_at IS NULL AND next_fire_at <= n.now ORDER BY next_fire_at LIMIT $2::int4) s ON true`;

const TEXT_STMT = statement('q_jobs_schedule_due', TEXT);

interface DueRow {
  now: Date;
  next_at: Date | null;
  name: string | null;
  cron: string;
  timezone: string;
  backfill_ms: number | null;
  next_fire_at: Date;
  last_slot: Date | null;
}

/** A schedule due at the tick's `now`, with what its slots are computed from. */
export interface DueSchedule {
  name: string;
  cron: string;
  timezone: string;
  backfillMs: number | null;
  nextFireAt: Date;
  lastSlot: Date | null;
}

/** One tick's read: the clock used, the earliest next fire time (null: no schedules), the due ones. */
export interface DueSchedules {
  now: Date;
  nextAt: Date | null;
  due: DueSchedule[];
}

/** The schedules due at `now` (null: the database clock), at most `limit`, earliest first. */
export async function dueSchedules(scope: StatementScope, db: Queryable, now: Date | null, limit: number): Promise<DueSchedules> {
  const { rows } = await scope.run<DueRow>(db, TEXT_STMT, [now, limit]);
  const first = rows[0];
  if (!first) throw new Error('schedule due: the statement returns at least one row'); // unreachable: a LEFT JOIN on one row
  const due: DueSchedule[] = [];
  for (const r of rows) {
    if (r.name === null) continue;
    due.push({ name: r.name, cron: r.cron, timezone: r.timezone, backfillMs: r.backfill_ms, nextFireAt: r.next_fire_at, lastSlot: r.last_slot });
  }
  return { now: first.now, nextAt: first.next_at, due };
}
