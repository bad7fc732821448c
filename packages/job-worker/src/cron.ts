// Cron patterns and their slots, through croner (no dependencies; 5 fields, or 6 with seconds;
// IANA time zones from the platform's Intl, so DST follows its tz data). A slot is an instant:
// on a DST fall-back the clock's repeated hour has different instants and a slot in each is its
// own slot, never the same one twice; a time the spring-forward skips is not invented (croner
// moves a named time that does not exist, e.g. 02:30, to the first instant after the gap).
import { Cron } from 'croner';
import { invalidArgument } from '@q/schema';

/** Slots enqueued by one firing at most: a longer backfill goes on at the next tick, at once. */
export const MAX_SLOTS_PER_FIRING = 1_000;
/** Where a pattern with no further slot parks its next fire time. */
const NEVER = new Date('9999-12-31T00:00:00.000Z');

/** A compiled pattern in its time zone. */
export interface CronSchedule {
  /** The first slot strictly after `t`, or null when there is none. */
  after(t: Date): Date | null;
  /** The last slot at or before `t`, or null. */
  atOrBefore(t: Date): Date | null;
}

/** Compiles `cron` in `timezone`, or throws `INVALID_ARGUMENT` (`<op>: cron must …`). */
export function compileCron(op: string, cron: unknown, timezone: unknown): CronSchedule {
  if (typeof timezone !== 'string' || timezone === '') throw invalidArgument(`${op}: timezone must be an IANA time zone name`);
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    throw invalidArgument(`${op}: timezone must be an IANA time zone name, got "${timezone.slice(0, 100)}"`);
  }
  if (typeof cron !== 'string' || cron.trim() === '')
    throw invalidArgument(`${op}: cron must be a cron pattern of 5 fields, or 6 with seconds first`);
  let c: Cron;
  try {
    c = new Cron(cron, { timezone, paused: true, mode: '5-or-6-parts' });
  } catch (err) {
    throw invalidArgument(`${op}: cron must be a cron pattern of 5 fields, or 6 with seconds first (${(err as Error).message})`);
  }
  const s: CronSchedule = {
    after: (t) => c.nextRun(t),
    atOrBefore: (t) => c.previousRuns(1, new Date(Math.floor(t.getTime() / 1000) * 1000 + 1000))[0] ?? null,
  };
  if (s.after(new Date()) === null) throw invalidArgument(`${op}: cron must have a slot after now`);
  return s;
}

/** What one due schedule enqueues now, and where its next fire time moves to. */
export interface SlotPlan {
  /** Oldest first (none: the pattern has no slot due since the row was read, it only moves on). */
  slots: Date[];
  nextFireAt: Date;
}

/**
 * The slots of a due schedule at `now`: by default only the latest slot at or before `now` (the
 * most recent missed one); with `backfillMs`, every slot in (now − backfillMs, now], oldest first
 * (at least the latest one, and at most {@link MAX_SLOTS_PER_FIRING}: the rest stays due). Never a
 * slot before `nextFireAt` (the first not yet enqueued) or at or before `lastSlot`.
 */
export function planSlots(c: CronSchedule, nextFireAt: Date, lastSlot: Date | null, backfillMs: number | null, now: Date): SlotPlan {
  const floor = Math.max(nextFireAt.getTime(), lastSlot === null ? -Infinity : lastSlot.getTime() + 1);
  const latest = c.atOrBefore(now);
  if (latest === null || latest.getTime() < floor) {
    // Nothing of this pattern is due (it changed since the row was read): just move on.
    return { slots: [], nextFireAt: c.after(now) ?? NEVER };
  }
  if (backfillMs === null) return { slots: [latest], nextFireAt: c.after(now) ?? NEVER };
  const from = Math.max(floor, now.getTime() - backfillMs + 1);
  const slots: Date[] = [];
  let s: Date | null = c.after(new Date(from - 1));
  while (s !== null && s.getTime() <= now.getTime() && slots.length < MAX_SLOTS_PER_FIRING) {
    slots.push(s);
    s = c.after(s);
  }
  if (slots.length === 0) return { slots: [latest], nextFireAt: c.after(now) ?? NEVER };
  return { slots, nextFireAt: s ?? NEVER };
}
