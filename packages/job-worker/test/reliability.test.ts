// Worker reliability on real Postgres: a job re-claimed by the same worker, leases that cannot be
// renewed, outcome writes that fail or wait, drains, concurrent wait() callers, maintenance
// hand-over and option validation.
import { JobStore, type Job } from '@q/store';
import type { TestSchema } from '@q/testing';
import pg from 'pg';
import { expect, it } from 'vitest';
import { JobAbortedError, Worker, type JobQueue, type WorkerOptions } from '../src/index.js';
import { memoryLogger, jobInStatus, useWorkerTests, waitFor } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let queue: JobQueue;
const cleanups: Array<() => Promise<void> | void> = [];
const { startWorker } = useWorkerTests('jreliab', { concurrency: 2, leaseDurationMs: 60_000 }, (t) => ({ schema, store, queue } = t), cleanups);

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const statusOf = (uuid: string, status: Job['status']) => jobInStatus(store, uuid, status);

/** A handler whose every call waits for its own gate; `calls[i]` is the i-th call. */
function gatedHandler(results: (i: number) => unknown = (i) => `run ${i}`) {
  const calls: Array<{ signal: AbortSignal; open: () => void; settled: boolean }> = [];
  const handler = (_job: Job, { signal }: { signal: AbortSignal }) => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const call = { signal, open, settled: false };
    const i = calls.push(call) - 1;
    return gate.then(() => {
      call.settled = true;
      return results(i);
    });
  };
  cleanups.push(() => calls.forEach((c) => c.open()));
  return { calls, handler };
}

/**
 * Runs `action` (PL/pgSQL) in a trigger `name` on every renewal of a lease (same token, later
 * expiry) until the test ends.
 */
async function onRenewal(name: string, action: string): Promise<void> {
  await store.pool.query(`
    CREATE OR REPLACE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.lease_token = OLD.lease_token AND NEW.lease_expires_at > OLD.lease_expires_at THEN
        ${action}
      END IF;
      RETURN NEW;
    END $$`);
  await store.pool.query(`CREATE TRIGGER ${name} BEFORE UPDATE ON q_jobs FOR EACH ROW EXECUTE FUNCTION ${name}()`);
  cleanups.push(async () => {
    await store.pool.query(`DROP TRIGGER IF EXISTS ${name} ON q_jobs`);
  });
}

/** Lets the job's lease lapse (on the database clock) and has it reaped and queued again. */
async function lapse(uuid: string): Promise<void> {
  await store.pool.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE uuid = $1`, [uuid]);
  // (The worker's own first maintenance round may be the one that reaps and promotes it.)
  await store.reapExpired();
  await store.promoteDue();
  await waitFor(async () => (await store.get(uuid))!.resumeCount === 1);
}

/** Holds a lock from another session until `release()`. */
async function holdLock(sql: string, values: unknown[] = []): Promise<{ release: () => Promise<void> }> {
  const c = new pg.Client({ connectionString: schema.dsn });
  await c.connect();
  await c.query('BEGIN');
  await c.query(sql, values);
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await c.query('COMMIT').catch(() => undefined);
    await c.end().catch(() => undefined);
  };
  cleanups.push(release);
  return { release };
}

// --- item 1: same-worker re-claim ---------------------------------------------------------------

it('same-worker re-claim: the stale run is aborted with lease_lost at once and wait() waits for it to settle', async () => {
  const job = await queue.enqueue({ type: 'reclaim' });
  const { calls, handler } = gatedHandler((i) => (i === 0 ? 'stale' : 'fresh'));
  const r = startWorker({ concurrency: 2, maintenanceIntervalMs: 60_000, workerId: 'same' }, (w) => w.register('reclaim', handler));
  await waitFor(() => calls.length === 1);
  await lapse(job.uuid);
  await waitFor(() => calls.length === 2); // the same worker claimed the job again
  await waitFor(() => calls[0]!.signal.aborted, 3_000);
  expect(calls[0]!.signal.reason).toBeInstanceOf(JobAbortedError);
  expect((calls[0]!.signal.reason as JobAbortedError).reason).toBe('lease_lost');
  expect(calls[1]!.signal.aborted).toBe(false);
  // A cancel now reaches the fresh run.
  expect(await queue.cancel(job.uuid)).toBe(true);
  await waitFor(() => calls[1]!.signal.aborted, 3_000);
  expect((calls[1]!.signal.reason as JobAbortedError).reason).toBe('cancelled');
  r.ac.abort();
  await r.run;
  let waited = false;
  const drained = r.worker.wait(30_000).then(() => (waited = true));
  calls[1]!.open();
  await waitFor(statusOf(job.uuid, 'cancelled'));
  await sleep(300);
  expect(waited).toBe(false); // the stale run is still in its handler (it ignores its signal)
  calls[0]!.open();
  await drained;
  expect(calls[0]!.settled).toBe(true);
  expect((await store.get(job.uuid))!.status).toBe('cancelled');
});

it('same-worker re-claim: when both runs finish in one tick only the fresh outcome is recorded and logged', async () => {
  const job = await queue.enqueue({ type: 'reclaim' });
  const logs = memoryLogger();
  const { calls, handler } = gatedHandler((i) => (i === 0 ? 'stale' : 'fresh'));
  startWorker({ concurrency: 2, maintenanceIntervalMs: 60_000, workerId: 'same', logger: logs }, (w) => w.register('reclaim', handler));
  await waitFor(() => calls.length === 1);
  await lapse(job.uuid);
  await waitFor(() => calls.length === 2);
  calls[0]!.open();
  calls[1]!.open();
  const done = await waitFor(statusOf(job.uuid, 'succeeded'));
  expect(done.result).toBe('fresh');
  await sleep(300);
  expect(logs.lines.filter((l) => l.msg === 'job succeeded')).toHaveLength(1);
});

it('heartbeats failing for a lease period: the handler is aborted with lease_lost while the database still holds its lease', async () => {
  await onRenewal('refuse_renewals', "RAISE EXCEPTION 'renewal refused by the test' USING ERRCODE = '57014';");
  const job = await queue.enqueue({ type: 'renewal' });
  const seen: Array<{ reason: unknown; stillLeased: boolean }> = [];
  startWorker({ concurrency: 2, leaseDurationMs: 3_000 }, (w) =>
    w.register('renewal', async (j, { signal }) => {
      if (seen.length > 0) return 'second';
      const {
        rows: [leased],
      } = await store.pool.query<{ token: string }>(`SELECT lease_token AS token FROM q_jobs_all WHERE id = $1`, [j.id]);
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
      const { rows } = await store.pool.query<{ held: boolean }>(
        `SELECT lease_token = $2 AND lease_expires_at > now() AS held FROM q_jobs_all WHERE id = $1`,
        [j.id, leased!.token],
      );
      seen.push({ reason: signal.reason, stillLeased: rows[0]?.held === true });
      throw signal.reason;
    }),
  );
  await waitFor(() => seen.length === 1, 10_000);
  expect((seen[0]!.reason as JobAbortedError).reason).toBe('lease_lost');
  expect(seen[0]!.stillLeased).toBe(true);
  await store.pool.query('DROP TRIGGER refuse_renewals ON q_jobs');
  // Only the renewals failed: once the handler stopped, the job was given back (not left to lapse
  // and count as a crash) and ran again at once.
  const done = await waitFor(statusOf(job.uuid, 'succeeded'), 10_000);
  expect(done).toMatchObject({ result: 'second', resumeCount: 0, attempt: 1 });
});

it('renewals: a job held past a sixth of its lease is renewed every sixth to third of it; jobs done sooner are never rewritten', async () => {
  // Every renewal (same token, later expiry) is counted per job by a trigger.
  await store.pool.query('CREATE TABLE renewals (id bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())');
  await onRenewal('count_renewals', 'INSERT INTO renewals (id) VALUES (NEW.id);');
  cleanups.push(async () => {
    await store.pool.query('DROP TABLE IF EXISTS renewals');
  });
  // Lease 1.2 s: a beat every 200 ms. The long job is held for 1.3 s; each short one for 60 ms,
  // one after another on the second slot, so a beat always finds one of them just claimed.
  const [long] = await queue.enqueueMany([{ type: 'long', priority: 1 }]);
  const shorts = await queue.enqueueMany(Array.from({ length: 20 }, () => ({ type: 'short' })));
  startWorker({ concurrency: 2, leaseDurationMs: 1_200, prefetch: 0 }, (w) => {
    w.register('long', () => sleep(1_300).then(() => 'long'));
    w.register('short', () => sleep(60).then(() => 'short'));
  });
  await waitFor(statusOf(long!.uuid, 'succeeded'), 10_000);
  for (const j of shorts) await waitFor(statusOf(j.uuid, 'succeeded'), 10_000);
  const { rows } = await store.pool.query<{ id: string; n: number; gaps: number[] }>(
    `SELECT id::text, count(*)::int AS n,
            array_agg(extract(epoch FROM at - lag) * 1000 ORDER BY at) FILTER (WHERE lag IS NOT NULL) AS gaps
     FROM (SELECT id, at, lag(at) OVER (PARTITION BY id ORDER BY at) FROM renewals) r GROUP BY id`,
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  for (const j of shorts) expect(byId.get(String(j.id))).toBeUndefined();
  // Renewed first between 200 and 400 ms into the run, then a beat (200 ms) after each renewal
  // came back: at least 3 times in 1.3 s, never sooner than a sixth apart nor much later than a third.
  const renewed = byId.get(String(long!.id));
  expect(renewed?.n).toBeGreaterThanOrEqual(3);
  expect(renewed?.gaps).toHaveLength(renewed!.n - 1);
  for (const gap of renewed?.gaps ?? []) {
    expect(gap).toBeGreaterThanOrEqual(150);
    expect(gap).toBeLessThan(450);
  }
});

// --- item 2: drain and outcome writes in flight ---------------------------------------------------

it('a drain timing out never gives back a job whose outcome write is in flight', async () => {
  const [a, b] = await queue.enqueueMany([
    { type: 'drain', priority: 2 },
    { type: 'drain', priority: 1 },
  ]);
  const { calls, handler } = gatedHandler();
  const r = startWorker({ concurrency: 2 }, (w) => w.register('drain', handler));
  await waitFor(() => calls.length === 2);
  // A's outcome write will wait on this row lock; B's outcome queues behind it.
  const lock = await holdLock('SELECT 1 FROM q_jobs WHERE uuid = $1 FOR UPDATE', [a!.uuid]);
  r.ac.abort();
  await r.run;
  const drained = r.worker.wait(800);
  calls[0]!.open();
  await sleep(100);
  calls[1]!.open();
  await sleep(1_200); // the drain timer fired meanwhile
  await lock.release();
  await drained;
  expect(await store.get(a!.uuid)).toMatchObject({ status: 'succeeded', attempt: 1 });
  expect(await store.get(b!.uuid)).toMatchObject({ status: 'succeeded', attempt: 1 });
});

// --- item 3: outcome write retried while the lease holds -----------------------------------------

it('an outcome write failing for 600 ms (lock timeouts) is retried until it is written', async () => {
  const u = new URL(schema.dsn);
  u.searchParams.set('options', `${u.searchParams.get('options') ?? ''} -c lock_timeout=50`);
  const own = await JobStore.open(u.toString(), { maxConns: 4 });
  const logs = memoryLogger();
  const job = await queue.enqueue({ type: 'blip' });
  const { calls, handler } = gatedHandler(() => 'ok');
  const r = startWorker({ concurrency: 1, logger: logs }, (w) => w.register('blip', handler), own);
  cleanups.push(async () => {
    r.ac.abort();
    await r.run;
    await r.worker.wait(5_000);
    await own.close();
  });
  await waitFor(() => calls.length === 1);
  const lock = await holdLock('SELECT 1 FROM q_jobs WHERE uuid = $1 FOR UPDATE', [job.uuid]);
  calls[0]!.open();
  await sleep(600);
  await lock.release();
  const done = await waitFor(statusOf(job.uuid, 'succeeded'), 5_000);
  expect(done).toMatchObject({ result: 'ok', attempt: 1 });
  expect(logs.lines.filter((l) => l.level === 'error')).toEqual([]);
});

// --- item 4: maintenance hand-over ----------------------------------------------------------------

it('a draining maintenance leader hands over: another worker promotes and runs a scheduled job meanwhile', async () => {
  const leaderStore = await JobStore.open(schema.dsn, { maxConns: 4, applicationName: 'q-jobs-leader-a' });
  const first = await queue.enqueue({ type: 'long' });
  const { calls, handler } = gatedHandler();
  const a = startWorker({ concurrency: 1, workerId: 'a' }, (w) => w.register('long', handler), leaderStore);
  cleanups.push(async () => {
    calls.forEach((c) => c.open());
    await a.worker.wait(5_000);
    await leaderStore.close();
  });
  await waitFor(async () => {
    const { rows } = await store.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM q_leader_leases WHERE owner = 'a' AND expires_at > clock_timestamp()`,
    );
    return rows[0]!.n === 1;
  });
  await waitFor(statusOf(first.uuid, 'running'));
  let ranOnB = false;
  startWorker({ concurrency: 1, workerId: 'b' }, (w) =>
    w.register('scheduled', async () => {
      ranOnB = true;
    }),
  );
  a.ac.abort();
  await a.run;
  const draining = a.worker.wait(30_000);
  const later = await queue.enqueue({ type: 'scheduled', runAt: new Date(Date.now() + 300) });
  await waitFor(statusOf(later.uuid, 'succeeded'), 5_000);
  expect(ranOnB).toBe(true);
  expect((await store.get(first.uuid))!.status).toBe('running'); // A was still draining
  calls[0]!.open();
  await draining;
  expect((await store.get(first.uuid))!.status).toBe('succeeded');
});

// --- items 6 and 7: wait() ------------------------------------------------------------------------

it('wait(timeoutMs) returns at its timeout while a claim statement is blocked', async () => {
  const r = startWorker({ concurrency: 1 }, () => undefined);
  await sleep(300);
  const lock = await holdLock('LOCK TABLE q_jobs IN ACCESS EXCLUSIVE MODE');
  const unlock = setTimeout(() => void lock.release(), 4_000); // in case wait() never returns by itself
  await sleep(400); // the next poll's claim now waits on the lock
  r.ac.abort();
  const started = Date.now();
  await r.worker.wait(500);
  const took = Date.now() - started;
  clearTimeout(unlock);
  await lock.release();
  await r.run;
  expect(took).toBeGreaterThanOrEqual(450);
  expect(took).toBeLessThan(2_000);
});

it('two concurrent wait() callers both return as soon as the drain ends', async () => {
  const job = await queue.enqueue({ type: 'two-waits' });
  const { calls, handler } = gatedHandler();
  const r = startWorker({ concurrency: 1 }, (w) => w.register('two-waits', handler));
  await waitFor(() => calls.length === 1);
  r.ac.abort();
  await r.run;
  const started = Date.now();
  const ends: number[] = [];
  const waits = [r.worker.wait(15_000), r.worker.wait(15_000)].map((p) => p.then(() => ends.push(Date.now() - started)));
  await sleep(200);
  calls[0]!.open();
  await Promise.all(waits);
  expect(ends).toHaveLength(2);
  expect(Math.max(...ends)).toBeLessThan(5_000);
  expect((await store.get(job.uuid))!.status).toBe('succeeded');
});

it('wait() with a timeout beyond the timer range waits for the drain instead of giving the job back at once', async () => {
  const job = await queue.enqueue({ type: 'long-wait' });
  const { calls, handler } = gatedHandler(() => 'done');
  const r = startWorker({ concurrency: 1 }, (w) => w.register('long-wait', handler));
  await waitFor(() => calls.length === 1);
  r.ac.abort();
  await r.run;
  setTimeout(() => calls[0]!.open(), 300);
  await r.worker.wait(2 ** 31);
  expect(await store.get(job.uuid)).toMatchObject({ status: 'succeeded', result: 'done', attempt: 1 });
  expect(calls[0]!.signal.aborted).toBe(false);
});

// --- items 8 and 10: validation -------------------------------------------------------------------

it('new Worker rejects NUL, lone surrogates and over-long names with INVALID_ARGUMENT', () => {
  const base = { queues: ['default'], concurrency: 1 };
  const bad: Array<Partial<WorkerOptions>> = [
    { workerId: 'w\u00001' },
    { workerId: 'x'.repeat(2_049) },
    { workerId: '\ud800' },
    { queues: ['de\u0000fault'] },
    { queues: ['default', 'q'.repeat(3_000)] },
    { queues: ['ok', ''] },
  ];
  for (const opts of bad) {
    expect(() => new Worker(store, { ...base, ...opts })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  }
  expect(new Worker(store, { ...base, workerId: 'é'.repeat(1_024) }).id).toHaveLength(1_024);
});

it('new Worker rejects timer options that would overflow a timer, or are too short, with INVALID_ARGUMENT', () => {
  const base = { queues: ['default'], concurrency: 1 };
  const bad: Array<Partial<WorkerOptions>> = [
    { leaseDurationMs: 3 * 2 ** 31 },
    { leaseDurationMs: 2 ** 31 - 1 },
    { leaseDurationMs: 50 },
    { leaseDurationMs: Infinity },
    { maintenanceIntervalMs: 2 ** 31 },
    { maintenanceIntervalMs: 0 },
    { pollIntervalMs: 2 ** 31 },
    { pollIntervalMs: Number.NaN },
  ];
  for (const opts of bad) {
    expect(() => new Worker(store, { ...base, ...opts }), JSON.stringify(opts)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  }
  expect(
    () => new Worker(store, { ...base, leaseDurationMs: 2 ** 31 - 2, maintenanceIntervalMs: 2 ** 31 - 2, pollIntervalMs: 2 ** 31 - 2 }),
  ).not.toThrow();
});
