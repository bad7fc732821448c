// Recurring jobs across real worker processes: three processes firing a schedule every second
// enqueue exactly one job per slot, also while one is SIGKILLed; after all of them were down,
// one catch-up job by default, or the backfill window's slots; a change and an unschedule are
// seen by every process at the next slot.
import { JobStore } from '@q/store';
import { createTestSchema, sleep, type TestSchema } from '@q/testing';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { JobQueue, KNOWN_QUEUES, type ScheduleOptions } from '../src/index.js';
import { spawnWorker, waitFor, type WorkerProcess } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let queue: JobQueue;
let children: WorkerProcess[] = [];

beforeAll(async () => {
  schema = await createTestSchema('jwschedp');
  store = await JobStore.open(schema.dsn, { maxConns: 4 });
  queue = new JobQueue(store, { knownQueues: [...KNOWN_QUEUES] });
});
afterEach(async () => {
  for (const c of children) c.child.kill('SIGKILL');
  await Promise.all(children.map((c) => c.exited));
  children = [];
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
});

function startWorkers(n: number, schedules: ScheduleOptions[] = []): Promise<WorkerProcess[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const p = await spawnWorker({ Q_DSN: schema.dsn, Q_WORKER_ID: `sched-${i}`, Q_SCHEDULES: JSON.stringify(schedules) }, 'schedule-worker.ts');
      children.push(p);
      return p;
    }),
  );
}

async function killAll(ps: WorkerProcess[]): Promise<void> {
  for (const p of ps) p.child.kill('SIGKILL');
  await Promise.all(ps.map((p) => p.exited));
}

interface SlotJob {
  slot: number;
  created: number;
  v: unknown;
}

/** The jobs of schedule `name` by slot (ms), with their creation time (the fire statement's clock). */
async function jobsOf(name: string): Promise<SlotJob[]> {
  const { rows } = await store.pool.query<{ slot: string; created_at: Date; v: unknown }>(
    `SELECT payload->>'scheduledFor' AS slot, created_at, payload->'v' AS v FROM q_jobs_all WHERE payload->>'name' = $1 ORDER BY id`,
    [name],
  );
  return rows.map((r) => ({ slot: Date.parse(r.slot), created: r.created_at.getTime(), v: r.v })).sort((a, b) => a.slot - b.slot);
}

/** Each slot once, one second after the other. */
function expectOnePerSecond(jobs: SlotJob[]): void {
  const slots = jobs.map((j) => j.slot);
  expect(new Set(slots).size).toBe(slots.length);
  for (let i = 1; i < slots.length; i++) expect(slots[i]! - slots[i - 1]!, `slot ${i} of ${slots.length}`).toBe(1_000);
}

const everySecond = (name: string, over: Partial<ScheduleOptions> = {}): ScheduleOptions => ({
  name,
  cron: '* * * * * *',
  type: 'tick',
  queue: 'sched',
  payload: { name },
  ...over,
});

it('three processes, every second for 10 s, one SIGKILLed midway: exactly one job per slot, none missing after the first', async () => {
  await queue.schedule(everySecond('fleet'));
  const ps = await startWorkers(3);
  const first = (await waitFor(async () => (await jobsOf('fleet'))[0], 20_000))!.slot;
  await waitFor(async () => (await jobsOf('fleet')).some((j) => j.slot >= first + 5_000), 20_000);
  ps[0]!.child.kill('SIGKILL');
  await ps[0]!.exited;
  await waitFor(async () => (await jobsOf('fleet')).some((j) => j.slot >= first + 10_000), 20_000);
  const jobs = (await jobsOf('fleet')).filter((j) => j.slot <= first + 10_000);
  expect(jobs).toHaveLength(11);
  expectOnePerSecond(jobs);
}, 90_000);

it('all processes down for 5 s: one catch-up job by default, five with a 5 s backfill, then one per second again', async () => {
  const defs = [everySecond('latest'), everySecond('backfill', { backfill: { maxMs: 5_000 } })];
  let ps = await startWorkers(3, defs);
  for (const name of ['latest', 'backfill']) await waitFor(async () => (await jobsOf(name)).length >= 2, 20_000);
  await killAll(ps);
  const stoppedAt = Date.now();
  const last = { latest: (await jobsOf('latest')).at(-1)!.slot, backfill: (await jobsOf('backfill')).at(-1)!.slot };
  // 6.5 s, so at least six slots are missed whatever the second the kill fell in: with five, a
  // 5 s backfill enqueues every missed slot and no gap is left to see.
  await sleep(6_500);
  const restarted = Date.now();
  ps = await startWorkers(3, defs);
  for (const name of ['latest', 'backfill'] as const) {
    await waitFor(async () => (await jobsOf(name)).filter((j) => j.created > stoppedAt).length >= 8, 30_000);
  }
  await killAll(ps);
  for (const [name, catchUp] of [
    ['latest', 1],
    ['backfill', 5],
  ] as const) {
    const after = (await jobsOf(name)).filter((j) => j.slot > last[name]);
    // The first fire after the restart is one statement: its jobs share its clock.
    const firstFire = Math.min(...after.map((j) => j.created));
    const caughtUp = after.filter((j) => j.created === firstFire);
    expect(caughtUp, name).toHaveLength(catchUp);
    expectOnePerSecond(caughtUp);
    // The catch-up ends with the latest slot due when it was read (after the restart began, before
    // the fire statement), and the rest follow one per second.
    expect(caughtUp.at(-1)!.slot).toBeGreaterThan(restarted - 1_000);
    expect(caughtUp.at(-1)!.slot).toBeLessThanOrEqual(firstFire);
    // Down 6.5 s from at most a second after the last slot: six slots or more were missed, and
    // only the latest (default) or the last five (backfill 5 s) were enqueued.
    if (catchUp === 1) expect(caughtUp[0]!.slot - last[name]).toBeGreaterThanOrEqual(5_000);
    else expect(caughtUp[0]!.slot - last[name]).toBeGreaterThan(1_000);
    expectOnePerSecond(after);
  }
}, 120_000);

it('a change is seen by every process at the next slot, and unschedule stops enqueues within one slot', async () => {
  await queue.schedule(everySecond('live', { payload: { name: 'live', v: 1 } }));
  await startWorkers(3);
  await waitFor(async () => (await jobsOf('live')).length >= 2, 20_000);

  await queue.schedule(everySecond('live', { payload: { name: 'live', v: 2 } }));
  const changed = Date.now();
  await waitFor(async () => (await jobsOf('live')).some((j) => j.slot > changed + 2_000), 20_000);
  const jobs = await jobsOf('live');
  expect(jobs.filter((j) => j.slot > changed).map((j) => j.v)).toEqual(jobs.filter((j) => j.slot > changed).map(() => 2));
  expectOnePerSecond(jobs);

  await queue.schedule({ ...everySecond('live', { payload: { name: 'live', v: 3 } }), cron: '*/2 * * * * *' });
  const recron = Date.now();
  await waitFor(async () => (await jobsOf('live')).some((j) => j.slot > recron + 4_000), 20_000);
  const later = (await jobsOf('live')).filter((j) => j.slot > recron);
  expect(later.length).toBeGreaterThanOrEqual(2);
  for (const j of later) expect({ second: new Date(j.slot).getUTCSeconds() % 2, v: j.v }).toEqual({ second: 0, v: 3 });

  expect(await queue.unschedule('live')).toBe(true);
  const removed = Date.now();
  const before = (await jobsOf('live')).length;
  await sleep(3_000);
  const after = await jobsOf('live');
  expect(after).toHaveLength(before);
  expect(after.filter((j) => j.created > removed)).toEqual([]);
}, 90_000);
