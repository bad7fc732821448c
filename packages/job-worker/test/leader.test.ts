// The maintenance leader as a lease row (issue 18), with real worker processes: exactly one
// leader among two, a SIGSTOPped leader replaced after expiry and fenced when it wakes, nothing
// left behind after close (no row held, no advisory lock, no session).
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import { leaderLeaseMs } from '../src/index.js';
import { spawnWorker, waitFor, type WorkerProcess } from './helpers.js';

let schema: TestSchema;
let store: JobStore;
let children: WorkerProcess[] = [];
const MAINT_MS = 200;
const TTL_MS = leaderLeaseMs(MAINT_MS);

beforeAll(async () => {
  schema = await createTestSchema('jwlead');
  store = await JobStore.open(schema.dsn, { maxConns: 4 });
});
afterEach(() => {
  for (const c of children) {
    c.child.kill('SIGCONT');
    c.child.kill('SIGKILL');
  }
  children = [];
});
afterAll(async () => {
  await store?.close();
  await schema?.drop();
});
beforeEach(async () => {
  await store.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys, q_leader_leases');
});

async function start(id: string): Promise<WorkerProcess> {
  const p = await spawnWorker({ Q_DSN: schema.dsn, Q_WORKER_ID: id, Q_MAINT_MS: String(MAINT_MS) }, 'leader-process.ts');
  children.push(p);
  return p;
}

interface Line {
  level: string;
  msg: string;
  epoch?: number;
  at: number;
}
const lines = (p: WorkerProcess): Line[] =>
  p
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);
const said = (p: WorkerProcess, msg: string) => lines(p).filter((l) => l.msg === msg);

// Times on the database clock, in ms since the epoch: what the lease is judged by.
const lease = async () =>
  (
    await store.pool.query<{ owner: string; epoch: number; live: boolean; acquiredAt: number; expiresAt: number }>(
      `SELECT owner, epoch::int AS epoch, expires_at > clock_timestamp() AS live,
              (extract(epoch FROM acquired_at) * 1000)::float8 AS "acquiredAt", (extract(epoch FROM expires_at) * 1000)::float8 AS "expiresAt"
         FROM q_leader_leases WHERE name = 'jobs_maintenance'`,
    )
  ).rows[0];
/** The lease once it is live: the row read, not a second read that may differ. */
const liveLease = (timeoutMs?: number) => waitFor(lease, { ...(timeoutMs !== undefined ? { timeoutMs } : {}), done: (l) => l?.live === true });

async function stopGracefully(p: WorkerProcess): Promise<void> {
  p.child.kill('SIGTERM');
  expect((await p.exited).code).toBe(0);
}

it('two worker processes: exactly one leader, the same one, for many lease periods', async () => {
  const [a, b] = await Promise.all([start('lead-a'), start('lead-b')]);
  const first = await liveLease();
  const deadline = Date.now() + 3 * TTL_MS;
  while (Date.now() < deadline) {
    const now = await lease();
    expect(now).toMatchObject({ owner: first.owner, epoch: first.epoch, live: true });
    await new Promise((r) => setTimeout(r, 100));
  }
  const acquired = [...said(a, 'maintenance leadership acquired'), ...said(b, 'maintenance leadership acquired')];
  expect(acquired).toHaveLength(1);
  expect(said(a, 'maintenance leadership lost').length + said(b, 'maintenance leadership lost').length).toBe(0);
  await Promise.all([stopGracefully(a), stopGracefully(b)]);
});

/**
 * SIGSTOPs whichever of the two workers (by worker id) holds the lease. On a loaded machine the first rounds of a
 * worker can run late enough for its lease to lapse and change hands just before the stop, and
 * the one stopped then is no leader: it is woken and the stop tried again (at most five times)
 * until the one stopped still holds the lease once whatever it sent before has landed.
 */
async function stopTheLeader(workers: Record<string, WorkerProcess>) {
  const [a, b] = Object.values(workers) as [WorkerProcess, WorkerProcess];
  for (let tries = 1; ; tries++) {
    const held = await liveLease();
    const [leader, other] = workers[held.owner] === a ? [a, b] : [b, a];
    leader.child.kill('SIGSTOP');
    await new Promise((r) => setTimeout(r, 200));
    const last = (await lease())!; // its last renewal: what it sent before the stop has landed
    if (last.owner === held.owner && last.epoch === held.epoch) return { held, leader, other, last };
    leader.child.kill('SIGCONT');
    if (tries === 5) throw new Error(`the leadership kept changing hands:\nA:\n${a.output()}\nB:\n${b.output()}`);
  }
}

it('a SIGSTOPped leader is replaced after its lease expires; woken, it finds itself fenced and does no maintenance', async () => {
  const [a, b] = await Promise.all([start('stop-a'), start('stop-b')]);
  const { held, leader, other, last } = await stopTheLeader({ 'stop-a': a, 'stop-b': b });
  const taken = await waitFor(async () => {
    const l = await lease();
    return l && l.owner !== held.owner && l.live ? l : undefined;
  }, 15_000);
  expect(taken.acquiredAt).toBeGreaterThanOrEqual(last.expiresAt); // not before the lease expired
  expect(taken.epoch).toBe(held.epoch + 1);
  // A job whose lease lapses now: only the live leader may reap it.
  const [job] = await store.enqueue([{ queue: 'other', type: 't' }]);
  await store.claim({ queues: ['other'], workerId: 'ghost', limit: 1, leaseMs: 60_000 });
  leader.child.kill('SIGCONT');
  const wokeAt = Date.now();
  await waitFor(() => said(leader, 'maintenance leadership lost').some((l) => l.at >= wokeAt) || undefined, 10_000).catch((e) => {
    throw new Error(`${e}\nLEADER:\n${leader.output()}\nOTHER:\n${other.output()}`);
  });
  await store.pool.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 s' WHERE id = $1`, [job!.id]);
  await waitFor(async () => ((await store.getById(job!.id))?.status === 'queued' ? true : undefined), 10_000);
  // The reaper logs after its round commits: its line may reach us a moment after the row changed.
  await waitFor(() => said(other, 'expired lease reaped').length >= 1 || undefined, 5_000);
  expect(said(leader, 'expired lease reaped').filter((l) => l.at >= wokeAt)).toEqual([]);
  expect(await lease()).toMatchObject({ owner: taken.owner, epoch: taken.epoch, live: true });
  await Promise.all([stopGracefully(a), stopGracefully(b)]);
});

it('nothing leaks after close: the lease is released, no advisory lock or session stays, a new pair elects at once', async () => {
  const [a, b] = await Promise.all([start('leak-a'), start('leak-b')]);
  await liveLease();
  await Promise.all([stopGracefully(a), stopGracefully(b)]);
  expect((await lease())?.live).toBe(false);
  const { rows } = await store.pool.query<{ sessions: number; advisory: number }>(
    `SELECT (SELECT count(*)::int FROM pg_stat_activity WHERE application_name LIKE 'q-lead-leak-%') AS sessions,
            (SELECT count(*)::int FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
              WHERE l.locktype = 'advisory' AND s.application_name LIKE 'q-lead-%') AS advisory`,
  );
  expect(rows[0]).toEqual({ sessions: 0, advisory: 0 });
  const before = (await lease())!.epoch;
  const [c, d] = await Promise.all([start('leak-c'), start('leak-d')]);
  // Their first round takes it: no waiting out an old lease (released) or a leaked lock.
  const next = await liveLease(TTL_MS);
  expect(next.epoch).toBe(before + 1);
  expect(['leak-c', 'leak-d']).toContain(next.owner);
  await Promise.all([stopGracefully(c), stopGracefully(d)]);
});
