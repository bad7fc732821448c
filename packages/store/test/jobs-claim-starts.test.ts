import { randomUUID } from 'node:crypto';
// Where a claim starts reading its queue (src/jobs/claim-starts.ts). While a session holds an old
// snapshot open, the dequeue-index entries of every job claimed since stay in the way of a claim
// from the queue's head; a claim past the last full claim's position does not read them. These
// tests hold the four ranges of the claim to the dequeue order, show the walk the position
// saves (with the buffers each claim reads), and hold the store to finding what a position
// passes over: a job behind it, a job whose lock key was busy, a released lease.
import { StatementScope } from '@q/schema/internal';
import { useJobStore } from '@q/testing';
import pg from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { JobStore, type LeasedJob } from '../src/index.js';
import {
  ClaimStarts,
  HEAD_SCAN_EVERY_MS,
  HEAD_SCAN_SHARE,
  KEYED_HOLD_MS,
  type ClaimEnd,
  type ClaimedRows,
  type ClaimStartParams,
} from '../src/jobs/claim-starts.js';
import { claimJobs } from '../src/jobs/sql/claim-jobs.js';
import { plansOf } from './requests/plans.js';

let store: JobStore;
let dsn: string;

useJobStore(JobStore, { prefix: 'claimstarts', maxConns: 1, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] }, (t) => {
  store = t.store;
  dsn = t.schema.dsn;
});

// Each test its own queue: the store's start positions (and a lock key's hold) outlive a test.
let QUEUE = 'starts';
let tests = 0;
beforeEach(() => {
  QUEUE = `starts_${++tests}`;
});
const jobs = (n: number, extra: { priority?: number; lockKey?: string } = {}) =>
  Array.from({ length: n }, (_, i) => ({ queue: QUEUE, type: 'noop', payload: { i }, ...extra }));
const claimOpts = (limit: number) => ({ queues: [QUEUE], workerId: 'w', limit, leaseMs: 60_000, start: true });
const FROM_HEAD: ClaimStartParams = { priority: [null], runAt: [null], id: [null] };

/** Just past `end` in its queue's dequeue order, as the store sends it. */
function past(end: ClaimEnd | undefined): ClaimStartParams {
  if (end === undefined) throw new Error('the claim leased nothing');
  return { priority: [end.priority], runAt: [end.runAt], id: [end.id] };
}

/** One claim statement sent as is (no start bookkeeping): what it leased, and the shared buffers it read. */
async function claimAt(starts: ClaimStartParams, limit: number): Promise<ClaimedRows & { buffers: number }> {
  const scope = new StatementScope(store.schema);
  let got: ClaimedRows = { jobs: [], end: undefined };
  const plans = await plansOf(
    store.pool,
    async () => {
      got = await claimJobs(scope, store.pool, {
        queues: [QUEUE],
        limit,
        workerId: 'w',
        leaseMs: 60_000,
        status: 'running',
        starts,
        claimId: randomUUID(),
      });
    },
    { buffers: true },
  );
  const claim = plans.at(-1);
  const buffers = (claim?.['Shared Hit Blocks'] ?? 0) + (claim?.['Shared Read Blocks'] ?? 0);
  return { ...got, buffers };
}

describe('claim ranges', () => {
  it('a claim past a position reads the higher priorities whole, its own priority past it, the lower ones after', async () => {
    const [early, middle, last] = await store.enqueue(jobs(3));
    const [high] = await store.enqueue(jobs(1, { priority: 5 }));
    const [low] = await store.enqueue(jobs(1, { priority: -5 }));
    const first = await claimAt(FROM_HEAD, 1);
    expect(first.jobs.map((j) => j.id)).toEqual([high?.id]);
    expect(first.end).toMatchObject({ queue: QUEUE, priority: 5, id: high?.id });
    // Past the first priority-0 job (at its exact run_at, which the batch shares): the two after it.
    const { rows } = await store.pool.query<{ run_at: string }>(
      `SELECT to_char(run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS run_at FROM q_jobs WHERE id = $1`,
      [early!.id],
    );
    const got = await claimAt({ priority: [0], runAt: [rows[0]!.run_at], id: [early!.id] }, 2);
    expect(got.jobs.map((j) => j.id).sort((a, b) => a - b)).toEqual([middle!.id, last!.id]);
    expect(got.end).toEqual({ queue: QUEUE, priority: 0, runAt: rows[0]!.run_at, id: last!.id });
    // Past every priority-0 job: the one behind the position first, then the lower priority.
    const later = { priority: [0], runAt: ['2999-01-01T00:00:00.000000'], id: [0] };
    expect((await claimAt(later, 1)).jobs.map((j) => j.id)).toEqual([early?.id]);
    expect((await claimAt(later, 5)).jobs.map((j) => j.id)).toEqual([low?.id]);
  });

  it('a claim past a position takes the jobs of its priority behind it before any lower priority', async () => {
    // Priority 0: twenty jobs, then a lower priority's twenty. A claim ends at the tenth.
    const zero = await store.enqueue(jobs(20));
    const low = await store.enqueue(jobs(20, { priority: -1 }));
    const first = await claimAt(FROM_HEAD, 10);
    expect(first.jobs.map((j) => j.id).sort((a, b) => a - b)).toEqual(zero.slice(0, 10).map((j) => j.id));
    // Another process gives back three of them (released, reaped): queued again, behind the position.
    const back = zero.slice(2, 5).map((j) => j.id);
    await store.pool.query(
      `UPDATE q_jobs SET status = 'queued', leased_by = NULL, lease_token = NULL, lease_expires_at = NULL WHERE id = ANY($1)`,
      [back],
    );
    // The next claim of twelve: the ten past the position, then the three behind it, no lower priority.
    const next = await claimAt(past(first.end), 12);
    const ids = new Set(next.jobs.map((j) => j.id));
    expect(next.jobs).toHaveLength(12);
    for (const id of zero.slice(10).map((j) => j.id)) expect(ids.has(id)).toBe(true);
    expect(next.jobs.filter((j) => j.priority === -1)).toEqual([]);
    expect(back.filter((id) => ids.has(id))).toHaveLength(2);
    // Then the last one behind the position, and only after it the lower priority.
    const rest = await claimAt(past(next.end), 3);
    expect(rest.jobs.filter((j) => j.priority === 0).map((j) => j.id)).toEqual(back.filter((id) => !ids.has(id)));
    expect(
      rest.jobs
        .filter((j) => j.priority === -1)
        .map((j) => j.id)
        .sort((a, b) => a - b),
    ).toEqual(low.slice(0, 2).map((j) => j.id));
  });

  it('under a held snapshot a claim past the last full claim reads a few pages; one from the head reads every claimed job again', async () => {
    const held = new pg.Client({ connectionString: dsn });
    await held.connect();
    try {
      await held.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await held.query('SELECT 1 FROM q_jobs LIMIT 1');
      await store.enqueue(jobs(7_000));
      let starts = FROM_HEAD;
      for (let i = 0; i < 12; i++) {
        const got = await claimAt(starts, 500);
        expect(got.jobs).toHaveLength(500);
        expect(got.end?.id).toBe(Math.max(...got.jobs.map((j) => j.id)));
        starts = past(got.end);
      }
      const next = await claimAt(starts, 1);
      const head = await claimAt(FROM_HEAD, 1);
      // Both take the next job in order (the one past the position, then the one after it).
      expect(head.jobs[0]!.id).toBe(next.jobs[0]!.id + 1);
      // From the head: the 6,000 claimed jobs' index entries and their table pages (about 35
      // rows to a page), still visible to the held snapshot. Past the position: the pages a
      // one-job claim reads and writes anyway (about 18).
      expect(head.buffers, `head ${head.buffers}, past ${next.buffers}`).toBeGreaterThan(120);
      expect(next.buffers, `head ${head.buffers}, past ${next.buffers}`).toBeLessThan(30);
    } finally {
      await held.query('ROLLBACK').catch(() => undefined);
      await held.end();
    }
  });
});

describe('the store finds what a position passes over', () => {
  it('a job queued behind the position is claimed by the next head scan', async () => {
    // A transaction that commits late: its job's run_at is its start, before every job below.
    const late = new pg.Client({ connectionString: dsn });
    await late.connect();
    let behind: { id: number } | undefined;
    let first: LeasedJob[];
    try {
      await late.query('BEGIN');
      [behind] = await store.enqueue([{ queue: QUEUE, type: 'noop', payload: {} }], { client: late });
      await store.enqueue(jobs(60));
      first = await store.claim(claimOpts(10));
      expect(first).toHaveLength(10);
      await late.query('COMMIT');
    } finally {
      await late.end();
    }
    const enqueuedAt = performance.now();
    const seen = new Set(first.map((j) => j.id));
    let foundAfter: number | undefined;
    while (foundAfter === undefined) {
      const got = await store.claim(claimOpts(1));
      expect(got).toHaveLength(1);
      for (const j of got) {
        expect(seen.has(j.id)).toBe(false);
        seen.add(j.id);
        if (j.id === behind!.id) foundAfter = performance.now() - enqueuedAt;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    // Claimed one a claim every 20 ms, the backlog would last over a second: the head scan due
    // HEAD_SCAN_EVERY_MS after the first claim finds the job well before that.
    expect(foundAfter).toBeLessThan(HEAD_SCAN_EVERY_MS + 500);
    expect(seen.size).toBeLessThan(40);
  });

  it('a job passed over for its busy lock key is claimed by the first claim after the key is free', async () => {
    const [holder, waiter] = await store.enqueue(jobs(2, { lockKey: 'k' }));
    await store.enqueue(jobs(40));
    const [h] = await store.claim(claimOpts(1));
    expect(h?.id).toBe(holder!.id);
    // Full claims while the key is held: the waiter is passed over, behind where they end.
    for (let i = 0; i < 3; i++) {
      const got = await store.claim(claimOpts(5));
      expect(got).toHaveLength(5);
      expect(got.map((j) => j.id)).not.toContain(waiter!.id);
    }
    expect(await store.complete([{ id: h!.id, leaseToken: h!.leaseToken, status: 'succeeded', result: null }])).toEqual([true]);
    const after = await store.claim(claimOpts(5));
    expect(after[0]?.id).toBe(waiter!.id);
  });

  it('released leases are claimed first again', async () => {
    await store.enqueue(jobs(30));
    const first = await store.claim(claimOpts(10));
    expect(first).toHaveLength(10);
    const back = first.slice(0, 3);
    expect(await store.release(back)).toHaveLength(3);
    const next = await store.claim(claimOpts(3));
    expect(next.map((j) => j.id)).toEqual(back.map((j) => j.id));
  });
});

describe('ClaimStarts', () => {
  const job = (id: number, extra: Partial<LeasedJob> = {}): LeasedJob =>
    ({ id, queue: 'a', priority: 0, runAt: new Date(0), lockKey: null, leaseToken: '', ...extra }) as LeasedJob;
  const runAt = (id: number) => `2026-12-04T00:00:00.${String(id).padStart(6, '0')}`;
  /** A claim's rows: `jobs`, the last of them (by run_at, which follows the id here) its end. */
  const rows = (...jobs: LeasedJob[]): ClaimedRows => {
    const last = jobs.reduce<LeasedJob | undefined>(
      (a, b) => (a === undefined || b.priority < a.priority || (b.priority === a.priority && b.id > a.id) ? b : a),
      undefined,
    );
    return { jobs, end: last && { queue: last.queue, priority: last.priority, runAt: runAt(last.id), id: last.id } };
  };

  it('starts past the last job of a full claim, and at the head after a short one', () => {
    const s = new ClaimStarts();
    const p1 = s.plan(['a'], 0);
    expect(p1.params).toEqual({ priority: [null], runAt: [null], id: [null] });
    s.record(p1, ['a'], 2, rows(job(2), job(1)), 1);
    const p2 = s.plan(['a'], 2);
    expect(p2.params).toEqual({ priority: [0], runAt: [runAt(2)], id: [2] });
    s.record(p2, ['a'], 2, rows(job(3)), 3);
    expect(s.plan(['a'], 4).params.id).toEqual([null]);
  });

  it('takes the claim that came back last, and keeps each queue apart', () => {
    const s = new ClaimStarts();
    const head = s.plan(['a', 'b'], 0);
    s.record(head, ['a', 'b'], 1, rows(job(5)), 1);
    // Queue a's claim came back full, b's (none of the one job) short.
    expect(s.plan(['a', 'b'], 2).params.id).toEqual([5, null]);
    s.record(s.plan(['b'], 3), ['b'], 1, rows(job(7, { queue: 'b' })), 3);
    // Two claims in flight from one position: the one that comes back last decides, even when it
    // was sent first and ended earlier (the next claim walks again what the other passed).
    const earlier = s.plan(['a'], 4);
    const later = s.plan(['a'], 5);
    s.record(later, ['a'], 1, rows(job(9)), 6);
    s.record(earlier, ['a'], 1, rows(job(8)), 7);
    expect(s.plan(['a', 'b'], 8).params.id).toEqual([8, 7]);
    // A later claim that ended earlier in the order (a job of a higher priority) moves it back.
    s.record(s.plan(['a'], 9), ['a'], 1, rows(job(4, { priority: 1 })), 10);
    expect(s.plan(['a'], 11).params).toEqual({ priority: [1], runAt: [runAt(4)], id: [4] });
    // forget() sends every queue's next claim to its head.
    s.forget();
    expect(s.plan(['a', 'b'], 12).params.id).toEqual([null, null]);
  });

  it('reads from the head every HEAD_SCAN_EVERY_MS, or less often when head scans are slow', () => {
    const s = new ClaimStarts();
    const head = s.plan(['a'], 0);
    // A first head scan of a second (a connection preparing its statement) does not space out the next.
    s.record(head, ['a'], 1, rows(job(1)), 1_000);
    const due = s.plan(['a'], 1_000);
    expect(due.params.id).toEqual([null]);
    // The claim beside it does not scan from the head too.
    expect(s.plan(['a'], 1_001).params.id).toEqual([1]);
    // Two head scans of 100 ms and more: the next is due 100 × HEAD_SCAN_SHARE ms after this one.
    s.record(due, ['a'], 1, rows(job(2)), 1_100);
    expect(s.plan(['a'], 1_000 + HEAD_SCAN_EVERY_MS).params.id).toEqual([2]);
    expect(s.plan(['a'], 1_000 + 100 * HEAD_SCAN_SHARE - 1).params.id).toEqual([2]);
    expect(s.plan(['a'], 1_000 + 100 * HEAD_SCAN_SHARE).params.id).toEqual([null]);
  });

  it('reads a queue from its head for KEYED_HOLD_MS after it gave a job with a lock key, and after forget()', () => {
    const s = new ClaimStarts();
    const head = s.plan(['a'], 0);
    s.record(head, ['a'], 2, rows(job(1), job(2, { lockKey: 'k' })), 1);
    expect(s.plan(['a'], 2).params.id).toEqual([null]);
    const later = s.plan(['a'], KEYED_HOLD_MS / 2);
    s.record(later, ['a'], 1, rows(job(3)), KEYED_HOLD_MS / 2);
    expect(s.plan(['a'], KEYED_HOLD_MS / 2 + 1).params.id).toEqual([null]);
    const free = s.plan(['a'], KEYED_HOLD_MS + 2);
    s.record(free, ['a'], 1, rows(job(4)), KEYED_HOLD_MS + 2);
    expect(s.plan(['a'], KEYED_HOLD_MS + 3).params.id).toEqual([4]);
    s.forget();
    expect(s.plan(['a'], KEYED_HOLD_MS + 4).params.id).toEqual([null]);
  });
});
