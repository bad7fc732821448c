// Recurring jobs in one process: bad input, upsert semantics, several schedulers racing on one
// slot, missed slots (latest only, or a backfill window) and DST transitions, with the clock
// driven through the scheduler's `now`.
import { JOURNAL_TABLE, bundledMigrations } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { JobStore } from '@q/store';
import { createTestSchema, useScratchSchemas, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { JobQueue, KNOWN_QUEUES, Scheduler, scheduledFor } from '../src/index.js';
import { resumeStoredSchedule, upsertSchedule } from '../src/schedules.js';

let schema: TestSchema;
let store: JobStore;
let queue: JobQueue;

beforeAll(async () => {
  schema = await createTestSchema('jwsched');
  store = await JobStore.open(schema.dsn, { maxConns: 8 });
  queue = new JobQueue(store, { knownQueues: [...KNOWN_QUEUES] });
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
});
beforeEach(async () => {
  await store.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys, q_schedules');
});

/** Every scheduled job's slot (ISO), in id order, per schedule name (from the payload's `name`). */
async function slots(): Promise<Array<{ name: string; slot: string; created: Date; payload: Record<string, unknown> }>> {
  const { rows } = await store.pool.query<{ payload: Record<string, unknown>; created_at: Date }>(
    `SELECT payload, created_at FROM q_jobs_all ORDER BY id`,
  );
  return rows.map((r) => ({ name: String(r.payload.name), slot: String(r.payload.scheduledFor), created: r.created_at, payload: r.payload }));
}

const at = (iso: string) => new Date(iso);

/** What `p` rejects with (failing the test when it resolves). */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe('bad input', () => {
  const base = { name: 'n', cron: '* * * * *', type: 't' };
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ['invalid cron', { cron: 'every minute' }, /schedule: cron must be a cron pattern/],
    ['cron of 7 fields', { cron: '* * * * * * *' }, /schedule: cron must be a cron pattern/],
    ['cron out of range', { cron: '61 * * * *' }, /schedule: cron must be a cron pattern/],
    ['cron that never fires', { cron: '0 0 30 2 *' }, /schedule: cron must have a slot after now/],
    ['non-string cron', { cron: 5 }, /schedule: cron must be a cron pattern/],
    ['unknown time zone', { timezone: 'Mars/Olympus_Mons' }, /schedule: timezone must be an IANA time zone name/],
    ['empty time zone', { timezone: '' }, /schedule: timezone must be an IANA time zone name/],
    ['name over 2,048 bytes', { name: 'é'.repeat(1025) }, /schedule: name is longer than 2048 bytes/],
    ['name with NUL', { name: 'a\u0000b' }, /schedule: name/],
    ['empty name', { name: '' }, /schedule: name must be a non-empty string/],
    ['non-string name', { name: 7 }, /schedule: name must be a non-empty string/],
    ['non-string type', { type: 7 }, /schedule: type must be a non-empty string/],
    ['empty type', { type: '' }, /schedule: type must be a non-empty string/],
    ['array payload', { payload: [1] }, /schedule: payload must be a JSON object/],
    ['payload with scheduledFor', { payload: { scheduledFor: 'x' } }, /schedule: payload must not have a scheduledFor key/],
    ['payload JSON cannot carry', { payload: { n: 1n } }, /schedule: payload/],
    ['fractional priority', { priority: 1.5 }, /schedule: priority must be an integer/],
    ['maxAttempts 0', { maxAttempts: 0 }, /schedule: maxAttempts must be an integer between 1/],
    ['backfill of 0 ms', { backfill: { maxMs: 0 } }, /schedule: backfill.maxMs must be a positive integer/],
    ['backfill not an object', { backfill: 5 }, /schedule: backfill must be \{ maxMs \}/],
    ['queue with NUL', { queue: 'q\u0000' }, /schedule: queue/],
    ['group with NUL', { group: 'g\u0000' }, /schedule: group/],
    ['group over 2,048 bytes', { group: 'é'.repeat(1025) }, /schedule: group is longer than 2048 bytes/],
    ['empty group', { group: '' }, /schedule: group must be a non-empty string/],
    ['non-string group', { group: 7 }, /schedule: group must be a non-empty string/],
  ];
  it.each(cases)('%s → INVALID_ARGUMENT, nothing written', async (_what, over, message) => {
    const err = await rejection(queue.schedule({ ...base, ...over } as never));
    expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((err as Error).message).toMatch(message);
    expect(await queue.schedules()).toEqual([]);
  });

  it('unschedule of a bad name → INVALID_ARGUMENT', async () => {
    expect(await rejection(queue.unschedule('a\u0000'))).toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('schedule, schedules, unschedule', () => {
  it('creates, lists with next fire time and last slot, replaces by name, deletes', async () => {
    const now = at('2026-06-01T10:00:30Z');
    const s = await upsertSchedule(store, { name: 'report', cron: '0 * * * *', type: 'report', payload: { name: 'report' } }, now);
    expect(s).toMatchObject({ name: 'report', timezone: 'UTC', queue: 'default', priority: 0, maxAttempts: 5, backfillMs: null, lastSlot: null });
    expect(s.nextFireAt.toISOString()).toBe('2026-06-01T11:00:00.000Z');
    // Same pattern again (a worker calling schedule() at start): the state is kept, the job fields replaced.
    const again = await upsertSchedule(
      store,
      { name: 'report', cron: '0 * * * *', type: 'report2', payload: { name: 'report' } },
      at('2026-06-01T12:30:00Z'),
    );
    expect(again.nextFireAt.toISOString()).toBe('2026-06-01T11:00:00.000Z');
    expect(again.type).toBe('report2');
    // A new pattern starts at its first slot after now.
    const moved = await upsertSchedule(
      store,
      { name: 'report', cron: '*/10 * * * *', type: 'report2', payload: { name: 'report' } },
      at('2026-06-01T12:31:00Z'),
    );
    expect(moved.nextFireAt.toISOString()).toBe('2026-06-01T12:40:00.000Z');
    expect((await queue.schedules()).map((x) => x.name)).toEqual(['report']);
    expect(await queue.unschedule('report')).toBe(true);
    expect(await queue.unschedule('report')).toBe(false);
    expect(await queue.schedules()).toEqual([]);
  });

  it('the job carries its slot in payload.scheduledFor and a key from the name and slot', async () => {
    await upsertSchedule(
      store,
      { name: 'tick', cron: '* * * * * *', type: 'tick', queue: 'critical', priority: 3, maxAttempts: 2, payload: { name: 'tick', x: 1 } },
      at('2026-06-01T10:00:00.200Z'),
    );
    const r = await new Scheduler(store, { now: () => at('2026-06-01T10:00:01.500Z') }).tick();
    expect(r).toMatchObject({ fired: ['tick'], enqueued: 1 });
    expect(r.nextAt?.toISOString()).toBe('2026-06-01T10:00:02.000Z');
    const [job] = (await queue.list({})).jobs;
    expect(job).toMatchObject({
      type: 'tick',
      queue: 'critical',
      priority: 3,
      maxAttempts: 2,
      status: 'queued',
      payload: { name: 'tick', x: 1, scheduledFor: '2026-06-01T10:00:01.000Z' },
    });
    expect(scheduledFor(job!)?.toISOString()).toBe('2026-06-01T10:00:01.000Z');
    expect(job!.idempotencyKey).toMatch(/^q:schedule:[0-9a-f]{32}:2026-06-01T10:00:01.000Z$/);
    const [info] = await queue.schedules();
    expect(info!.lastSlot?.toISOString()).toBe('2026-06-01T10:00:01.000Z');
    expect(info!.nextFireAt.toISOString()).toBe('2026-06-01T10:00:02.000Z');
  });

  it('a tick with nothing due reads and writes nothing else, and reports the earliest next fire time', async () => {
    await upsertSchedule(store, { name: 'a', cron: '0 0 * * *', type: 't' }, at('2026-06-01T10:00:00Z'));
    await upsertSchedule(store, { name: 'b', cron: '0 12 * * *', type: 't' }, at('2026-06-01T10:00:00Z'));
    const r = await new Scheduler(store, { now: () => at('2026-06-01T11:00:00Z') }).tick();
    expect(r).toMatchObject({ fired: [], enqueued: 0 });
    expect(r.nextAt?.toISOString()).toBe('2026-06-01T12:00:00.000Z');
    expect(await slots()).toEqual([]);
  });
});

describe('exactly once per slot', () => {
  it('eight schedulers ticking together at every instant of a minute enqueue each slot once', async () => {
    const start = at('2026-06-01T10:00:00.000Z');
    await upsertSchedule(store, { name: 'race', cron: '* * * * * *', type: 't', payload: { name: 'race' } }, start);
    let now = start;
    const schedulers = Array.from({ length: 8 }, () => new Scheduler(store, { now: () => now }));
    let advanced = 0;
    let enqueued = 0;
    for (let ms = 250; ms <= 60_000; ms += 250) {
      now = new Date(start.getTime() + ms);
      for (const r of await Promise.all(schedulers.map((s) => s.tick()))) {
        advanced += r.fired.length;
        enqueued += r.enqueued;
      }
    }
    // The compare-and-set alone lets one scheduler advance each slot (the key is only a second fence).
    expect({ advanced, enqueued }).toEqual({ advanced: 60, enqueued: 60 });
    const got = (await slots()).map((s) => s.slot);
    const want = Array.from({ length: 60 }, (_, i) => new Date(start.getTime() + (i + 1) * 1000).toISOString());
    expect(got).toEqual(want);
  });
});

describe('many schedules', () => {
  it('schedules sharing a pattern each enqueue their own job per slot; a different state gets its own plan', async () => {
    const t0 = at('2026-06-01T10:00:00.000Z');
    for (const name of ['a', 'b', 'c']) await upsertSchedule(store, { name, cron: '* * * * *', type: 't', payload: { name } }, t0);
    // d has the same pattern but was created a minute later: another next fire time.
    await upsertSchedule(store, { name: 'd', cron: '* * * * *', type: 't', payload: { name: 'd' } }, at('2026-06-01T10:01:00.000Z'));
    let now = at('2026-06-01T10:01:30.000Z');
    const s = new Scheduler(store, { now: () => now });
    expect((await s.tick()).fired).toEqual(['a', 'b', 'c']);
    now = at('2026-06-01T10:02:30.000Z');
    expect((await s.tick()).fired).toEqual(['a', 'b', 'c', 'd']);
    const got = (await slots()).map((x) => `${x.name}@${x.slot.slice(14, 16)}`).sort();
    expect(got).toEqual(['a@01', 'a@02', 'b@01', 'b@02', 'c@01', 'c@02', 'd@02']);
  });
});

describe('missed slots', () => {
  async function downtime(backfill: { maxMs: number } | undefined): Promise<string[]> {
    const start = at('2026-06-01T10:00:00.000Z');
    await upsertSchedule(store, { name: 'm', cron: '* * * * * *', type: 't', payload: { name: 'm' }, ...(backfill ? { backfill } : {}) }, start);
    let now = at('2026-06-01T10:00:01.100Z');
    const s = new Scheduler(store, { now: () => now });
    await s.tick();
    now = at('2026-06-01T10:00:08.300Z'); // slots 2–8 missed
    await s.tick();
    now = at('2026-06-01T10:00:09.050Z');
    await s.tick();
    return (await slots()).map((x) => x.slot.slice(17, 19));
  }

  it('by default only the most recent missed slot is enqueued', async () => {
    expect(await downtime(undefined)).toEqual(['01', '08', '09']);
  });

  it('with backfill, every slot of the window, oldest first (ids in slot order)', async () => {
    expect(await downtime({ maxMs: 5_000 })).toEqual(['01', '04', '05', '06', '07', '08', '09']);
  });

  it('a backfill window longer than the downtime enqueues every missed slot once', async () => {
    expect(await downtime({ maxMs: 3_600_000 })).toEqual(['01', '02', '03', '04', '05', '06', '07', '08', '09']);
  });
});

describe('groups', () => {
  it("each slot's job is in the schedule's group; a change of group applies from the next slot", async () => {
    const start = at('2026-06-01T10:00:00.000Z');
    let now = start;
    const s = new Scheduler(store, { now: () => now });
    const viaQueue = await queue.schedule({ name: 'h', cron: '0 0 * * *', type: 't', group: 'tenant-1' });
    expect(viaQueue.group).toBe('tenant-1');
    expect(await queue.unschedule('h')).toBe(true);
    await upsertSchedule(store, { name: 'g', cron: '* * * * * *', type: 't', group: 'tenant-1', payload: { name: 'g' } }, start);
    now = at('2026-06-01T10:00:01.200Z');
    await s.tick();
    await upsertSchedule(store, { name: 'g', cron: '* * * * * *', type: 't', group: 'tenant-2', payload: { name: 'g' } }, now);
    now = at('2026-06-01T10:00:02.200Z');
    await s.tick();
    // Without a group, the next slot's job belongs to none.
    await upsertSchedule(store, { name: 'g', cron: '* * * * * *', type: 't', payload: { name: 'g' } }, now);
    expect((await queue.schedules())[0]!.group).toBeNull();
    now = at('2026-06-01T10:00:03.200Z');
    await s.tick();
    const jobs = (await queue.list({})).jobs.sort((a, b) => a.id - b.id);
    expect(jobs.map((j) => [scheduledFor(j)!.toISOString().slice(17, 19), j.group])).toEqual([
      ['01', 'tenant-1'],
      ['02', 'tenant-2'],
      ['03', null],
    ]);
  });
});

describe('migration 0012 (schedule groups) on a database through 0011', () => {
  const scratch = useScratchSchemas({ quoteIdent, journalTable: JOURNAL_TABLE });

  it('keeps every schedule, in no group, firing as before; a group can then be set', async () => {
    const older = await scratch.olderBuild('jwschedup', bundledMigrations('jobs'), '0012');
    await scratch.admin.query(
      `INSERT INTO ${older.quoted}.q_schedules (name, cron, timezone, queue, job_type, payload, next_fire_at)
       VALUES ('old', '* * * * * *', 'UTC', 'default', 't', '{"name": "old"}', '2026-06-01T10:00:01Z')`,
    );
    const upgraded = await JobStore.open(older.dsn, { maxConns: 2 }); // applies 0012
    try {
      const q = new JobQueue(upgraded, { knownQueues: [...KNOWN_QUEUES] });
      expect(await q.schedules()).toMatchObject([{ name: 'old', group: null, nextFireAt: at('2026-06-01T10:00:01Z') }]);
      let now = at('2026-06-01T10:00:01.500Z');
      const s = new Scheduler(upgraded, { now: () => now });
      expect(await s.tick()).toMatchObject({ fired: ['old'], enqueued: 1 });
      await upsertSchedule(upgraded, { name: 'old', cron: '* * * * * *', type: 't', group: 'g', payload: { name: 'old' } }, now);
      now = at('2026-06-01T10:00:02.500Z');
      expect(await s.tick()).toMatchObject({ fired: ['old'], enqueued: 1 });
      expect((await q.list({})).jobs.map((j) => j.group).sort()).toEqual(['g', null]);
    } finally {
      await upgraded.close();
    }
  });
});

describe('pause and resume', () => {
  it('a paused schedule enqueues nothing and is not due; resuming starts at the first slot after now, without backfill', async () => {
    const start = at('2026-06-01T10:00:00.000Z');
    let now = at('2026-06-01T10:00:01.100Z');
    const s = new Scheduler(store, { now: () => now });
    await upsertSchedule(store, { name: 'p', cron: '* * * * * *', type: 't', payload: { name: 'p' }, backfill: { maxMs: 3_600_000 } }, start);
    await upsertSchedule(store, { name: 'other', cron: '0 0 * * *', type: 't', payload: { name: 'other' } }, start);
    await s.tick();
    const paused = await queue.pauseSchedule('p');
    expect(paused.pausedAt).toBeInstanceOf(Date);
    // Pausing again keeps when it was first paused.
    expect((await queue.pauseSchedule('p')).pausedAt).toEqual(paused.pausedAt);
    expect((await queue.schedules()).map((x) => [x.name, x.pausedAt !== null])).toEqual([
      ['other', false],
      ['p', true],
    ]);
    now = at('2026-06-01T10:00:09.300Z');
    // Not due, and not the earliest next fire time: the other schedule's is.
    expect(await s.tick()).toMatchObject({ fired: [], enqueued: 0, nextAt: at('2026-06-02T00:00:00Z') });
    const resumed = await resumeStoredSchedule(store, 'p', at('2026-06-01T10:00:09.300Z'));
    expect(resumed).toMatchObject({ pausedAt: null, nextFireAt: at('2026-06-01T10:00:10Z') });
    // Resuming a running schedule changes nothing.
    expect(await queue.resumeSchedule('p')).toMatchObject({ pausedAt: null, nextFireAt: at('2026-06-01T10:00:10Z') });
    now = at('2026-06-01T10:00:10.200Z');
    await s.tick();
    // Slots 02–09 fell in the paused time: not enqueued, though the backfill window covers them.
    expect((await slots()).map((x) => x.slot.slice(17, 19))).toEqual(['01', '10']);
  });

  it('a tick that read the schedule as due before the pause does not fire it', async () => {
    await upsertSchedule(store, { name: 'r', cron: '* * * * * *', type: 't', payload: { name: 'r' } }, at('2026-06-01T10:00:00Z'));
    const read = await store.dueSchedules(at('2026-06-01T10:00:01.500Z'));
    const due = read.due[0]!;
    await queue.pauseSchedule('r');
    const fired = await store.fireSchedules([
      {
        name: 'r',
        expectedNextFireAt: due.nextFireAt,
        cron: due.cron,
        timezone: due.timezone,
        backfillMs: null,
        nextFireAt: at('2026-06-01T10:00:02Z'),
        slots: [due.nextFireAt],
      },
    ]);
    expect(fired).toEqual({ fired: [], enqueued: 0 });
    expect(await slots()).toEqual([]);
  });

  it('unknown name → NOT_FOUND; bad name → INVALID_ARGUMENT', async () => {
    expect(await rejection(queue.pauseSchedule('nope'))).toMatchObject({ code: 'NOT_FOUND' });
    expect(await rejection(queue.resumeSchedule('nope'))).toMatchObject({ code: 'NOT_FOUND' });
    expect(await rejection(queue.pauseSchedule(''))).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(await rejection(queue.resumeSchedule(7 as never))).toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('migration 0015 (schedule pause) on a database through 0014', () => {
  const scratch = useScratchSchemas({ quoteIdent, journalTable: JOURNAL_TABLE });

  it('keeps every schedule running and firing; it can then be paused', async () => {
    const older = await scratch.olderBuild('jwschedpause', bundledMigrations('jobs'), '0015');
    await scratch.admin.query(
      `INSERT INTO ${older.quoted}.q_schedules (name, cron, timezone, queue, job_type, payload, next_fire_at)
       VALUES ('old', '* * * * * *', 'UTC', 'default', 't', '{"name": "old"}', '2026-06-01T10:00:01Z')`,
    );
    const upgraded = await JobStore.open(older.dsn, { maxConns: 2 }); // applies 0015
    try {
      const q = new JobQueue(upgraded, { knownQueues: [...KNOWN_QUEUES] });
      expect(await q.schedules()).toMatchObject([{ name: 'old', pausedAt: null }]);
      const s = new Scheduler(upgraded, { now: () => at('2026-06-01T10:00:01.500Z') });
      expect(await s.tick()).toMatchObject({ fired: ['old'], enqueued: 1 });
      await q.pauseSchedule('old');
      const s2 = new Scheduler(upgraded, { now: () => at('2026-06-01T10:00:05.500Z') });
      expect(await s2.tick()).toMatchObject({ fired: [], enqueued: 0, nextAt: null });
    } finally {
      await upgraded.close();
    }
  });
});

describe('changes take effect at the next slot', () => {
  it('payload, type and pattern changes apply from the next slot; unschedule stops it', async () => {
    const start = at('2026-06-01T10:00:00.000Z');
    let now = start;
    const s = new Scheduler(store, { now: () => now });
    await upsertSchedule(store, { name: 'c', cron: '* * * * * *', type: 't', payload: { name: 'c', v: 1 } }, start);
    now = at('2026-06-01T10:00:01.200Z');
    await s.tick();
    await upsertSchedule(store, { name: 'c', cron: '* * * * * *', type: 't2', payload: { name: 'c', v: 2 } }, now);
    now = at('2026-06-01T10:00:02.200Z');
    await s.tick();
    // Every 5 s from now on: the next slot is :05.
    await upsertSchedule(store, { name: 'c', cron: '*/5 * * * * *', type: 't2', payload: { name: 'c', v: 3 } }, now);
    now = at('2026-06-01T10:00:04.900Z');
    await s.tick();
    now = at('2026-06-01T10:00:05.100Z');
    await s.tick();
    expect(await queue.unschedule('c')).toBe(true);
    now = at('2026-06-01T10:00:20.000Z');
    expect(await s.tick()).toMatchObject({ enqueued: 0, nextAt: null });
    const got = (await slots()).map((x) => [x.slot.slice(17, 19), x.payload.v]);
    expect(got).toEqual([
      ['01', 1],
      ['02', 2],
      ['05', 3],
    ]);
    const { rows } = await store.pool.query(`SELECT job_type FROM q_jobs ORDER BY id`);
    expect(rows.map((r) => r.job_type)).toEqual(['t', 't2', 't2']);
  });
});

describe('DST, driven through now', () => {
  const local = (iso: string, tz: string) =>
    new Intl.DateTimeFormat(tz.startsWith('America') ? 'en-US' : 'en-GB', {
      timeZone: tz,
      hour: '2-digit',
      minute: '2-digit',
      timeZoneName: 'short',
      hourCycle: 'h23',
    }).format(new Date(iso));

  /** Three schedulers tick every minute from `from` to `to` (exclusive of `from`); returns the slots per schedule. */
  async function drive(from: string, to: string, defs: Array<{ name: string; cron: string; timezone: string }>): Promise<Map<string, string[]>> {
    let now = at(from);
    for (const d of defs) await upsertSchedule(store, { ...d, type: 't', payload: { name: d.name } }, now);
    const schedulers = Array.from({ length: 3 }, () => new Scheduler(store, { now: () => now }));
    for (let t = at(from).getTime() + 60_000; t <= at(to).getTime(); t += 60_000) {
      now = new Date(t);
      await Promise.all(schedulers.map((s) => s.tick()));
    }
    const out = new Map<string, string[]>();
    for (const s of await slots()) out.set(s.name, [...(out.get(s.name) ?? []), s.slot]);
    return out;
  }

  it('America/New_York fall back: the repeated hour is not doubled, every instant once', async () => {
    const tz = 'America/New_York';
    // 2026-11-01 02:00 EDT → 01:00 EST at 06:00Z.
    const got = await drive('2026-11-01T04:00:00Z', '2026-11-01T09:00:00Z', [
      { name: 'quarter', cron: '*/15 * * * *', timezone: tz },
      { name: 'daily', cron: '30 1 * * *', timezone: tz },
    ]);
    const quarter = got.get('quarter')!;
    expect(new Set(quarter).size).toBe(quarter.length);
    // Five hours of elapsed time: 20 quarter hours, each instant once, none twice.
    expect(quarter).toHaveLength(20);
    for (let i = 1; i < quarter.length; i++) expect(Date.parse(quarter[i]!) - Date.parse(quarter[i - 1]!)).toBe(15 * 60_000);
    // The wall clock shows 01:xx twice, once in each offset.
    expect(quarter.map((s) => local(s, tz)).filter((l) => l.startsWith('01:'))).toEqual([
      '01:00 EDT',
      '01:15 EDT',
      '01:30 EDT',
      '01:45 EDT',
      '01:00 EST',
      '01:15 EST',
      '01:30 EST',
      '01:45 EST',
    ]);
    // A daily 01:30 runs once that day (croner picks the first occurrence).
    expect(got.get('daily')).toEqual(['2026-11-01T05:30:00.000Z']);
  });

  it('America/New_York spring forward: no slot invented in the skipped hour', async () => {
    const tz = 'America/New_York';
    // 2026-03-08 02:00 EST → 03:00 EDT at 07:00Z.
    const got = await drive('2026-03-08T05:00:00Z', '2026-03-08T10:00:00Z', [
      { name: 'quarter', cron: '*/15 * * * *', timezone: tz },
      { name: 'daily', cron: '30 2 * * *', timezone: tz },
    ]);
    const quarter = got.get('quarter')!;
    expect(new Set(quarter).size).toBe(quarter.length);
    expect(quarter).toHaveLength(20);
    expect(quarter.map((s) => local(s, tz)).filter((l) => l.startsWith('02:'))).toEqual([]);
    // The daily 02:30 does not exist that day: croner runs it once, at the first instant after the gap.
    expect(got.get('daily')!.map((s) => local(s, tz))).toEqual(['03:00 EDT']);
  });

  it('Europe/Berlin fall back with a seconds pattern: no slot doubled', async () => {
    const tz = 'Europe/Berlin';
    // 2026-10-25 03:00 CEST → 02:00 CET at 01:00Z.
    const got = await drive('2026-10-25T00:00:00Z', '2026-10-25T02:00:00Z', [{ name: 'half', cron: '0 0,30 * * * *', timezone: tz }]);
    const half = got.get('half')!;
    expect(half).toHaveLength(4);
    expect(half.map((s) => local(s, tz))).toEqual(['02:30 CEST', '02:00 CET', '02:30 CET', '03:00 CET']);
  });
});
