// Job keys (#39 item 1, migration 0010): a key held per (queue, type, key) by a pending job, with
// modes replace, debounce and throttle. The state table of the @q/job-worker README (existing job:
// none, queued, scheduled, running, succeeded, dead, cancelled × mode → outcome), concurrent
// enqueues of one key (one job), a claimed keyed job going back to waiting while a newer pending
// job holds its key, batches, the caller's transaction, and the options refused — on real Postgres.
import { QErrorCode, isQError } from '@q/schema';
import { inTransaction, useJobStore, type TestSchema } from '@q/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { JobStore, type EnqueueResult, type Job, type JobKeyMode, type LeasedJob, type NewJob } from '../src/index.js';

let schema: TestSchema;
let store: JobStore;
let sql: pg.Pool;
const LEASE = 30_000;
/** A window no test crosses (windows are aligned to the epoch: a boundary inside one test is a 1-in-10⁶ chance). */
const WIDE = 2_147_483_647;

useJobStore(JobStore, { prefix: 'jobkeys', maxConns: 12, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] }, (t) => {
  ({ schema, store } = t);
  sql = schema.pool();
});

const count = async () => (await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM q_jobs_all')).rows[0]!.n;
const one = async (job: NewJob): Promise<EnqueueResult> => (await store.enqueueResults([job]))[0]!;
const keyed = (mode: JobKeyMode, extra: Partial<NewJob> = {}): NewJob => ({
  queue: 'default',
  type: 't',
  jobKey: 'k',
  jobKeyMode: mode,
  ...(mode === 'throttle' ? { throttleMs: WIDE } : {}),
  ...extra,
});
const claim = async (): Promise<LeasedJob> => {
  const [job] = await store.claim({ queues: ['default'], workerId: 'w1', limit: 1, leaseMs: LEASE });
  if (!job) throw new Error('nothing claimed');
  return job;
};
const lease = (j: LeasedJob) => ({ id: j.id, leaseToken: j.leaseToken });

type State = 'none' | 'queued' | 'scheduled' | 'running' | 'succeeded' | 'dead' | 'cancelled';
const STATES: State[] = ['none', 'queued', 'scheduled', 'running', 'succeeded', 'dead', 'cancelled'];
const LATER = () => new Date(Date.now() + 3_600_000);
const MUCH_LATER = () => new Date(Date.now() + 7_200_000);

/** Puts a job of `mode` with key k into `state` (payload {v:1}, priority 1); null for none. */
async function existing(mode: JobKeyMode, state: State): Promise<Job | null> {
  if (state === 'none') return null;
  const r = await one(keyed(mode, { payload: { v: 1 }, priority: 1, ...(state === 'scheduled' ? { runAt: LATER() } : {}) }));
  expect(r.created).toBe(true);
  if (state === 'queued' || state === 'scheduled') return r.job;
  if (state === 'cancelled') {
    expect(await store.cancel(r.job.uuid)).toBe('cancelled');
    return r.job;
  }
  const leased = await claim();
  expect(leased.id).toBe(r.job.id);
  await store.markRunning([lease(leased)]);
  if (state === 'succeeded') expect(await store.complete([{ ...lease(leased), status: 'succeeded' }])).toEqual([true]);
  if (state === 'dead') expect(await store.complete([{ ...lease(leased), status: 'dead_letter', error: 'x' }])).toEqual([true]);
  return r.job;
}

// The README's table, row by row: what the second enqueue (payload {v:2}, priority 2, runAt
// "now" or MUCH_LATER) returns and what the first job then is.
describe('the state table (existing job × mode → outcome)', () => {
  for (const mode of ['replace', 'debounce'] as const) {
    for (const state of STATES) {
      it(`${mode}, existing ${state}`, async () => {
        const first = await existing(mode, state);
        const second = await one(keyed(mode, { payload: { v: 2 }, priority: 2 }));
        const pending = state === 'queued' || state === 'scheduled';
        if (!pending) {
          // Nothing pending holds the key: a new job, holding it; the existing one is left alone.
          expect(second.created).toBe(true);
          expect(second.job).toMatchObject({ status: 'queued', payload: { v: 2 }, priority: 2, jobKey: 'k' });
          if (first) {
            expect(second.job.id).not.toBe(first.id);
            const before = (await store.getById(first.id))!;
            expect(before.payload).toEqual({ v: 1 });
            // A claim clears the key; a job cancelled while pending keeps it (archived, it holds nothing).
            expect(before.jobKey).toBe(state === 'cancelled' ? 'k' : null);
          }
          expect(await count()).toBe(first ? 2 : 1);
          return;
        }
        // The pending job is updated in place and returned.
        expect(second.created).toBe(false);
        expect(second.job).toMatchObject({ id: first!.id, uuid: first!.uuid, payload: { v: 2 }, priority: 2, jobKey: 'k' });
        if (mode === 'replace') {
          // replace takes the new runAt: "now" queues a scheduled job at once.
          expect(second.job.status).toBe('queued');
        } else {
          // debounce keeps the scheduled time.
          expect(second.job.status).toBe(state);
          expect(second.job.runAt.getTime()).toBe(first!.runAt.getTime());
        }
        expect(await store.getById(first!.id)).toStrictEqual(second.job);
        expect(await count()).toBe(1);
      });
    }
  }

  for (const state of STATES) {
    it(`throttle, existing ${state} in the same window`, async () => {
      const first = await existing('throttle', state);
      const second = await one(keyed('throttle', { payload: { v: 2 }, priority: 2 }));
      if (!first) {
        expect(second.created).toBe(true);
        expect(second.job).toMatchObject({ payload: { v: 2 }, jobKey: 'k', idempotencyKey: null });
        return;
      }
      // Whatever its state, the job of the window is returned unchanged.
      expect(second.created).toBe(false);
      expect(second.job).toMatchObject({ id: first.id, payload: { v: 1 }, priority: 1, jobKey: 'k', idempotencyKey: null });
      expect(second.job.status).toBe(state === 'dead' ? 'dead_letter' : state);
      expect(await count()).toBe(1);
    });
  }

  it('replace moves a pending job to a later runAt (scheduled); debounce does not', async () => {
    const first = (await one(keyed('replace'))).job;
    expect(first.status).toBe('queued');
    const later = MUCH_LATER();
    const r = await one(keyed('replace', { runAt: later }));
    expect(r).toMatchObject({ created: false, job: { id: first.id, status: 'scheduled' } });
    expect(r.job.runAt.getTime()).toBe(later.getTime());
    const d = await one(keyed('debounce', { runAt: new Date(later.getTime() + 1000) }));
    expect(d).toMatchObject({ created: false, job: { id: first.id, status: 'scheduled' } });
    expect(d.job.runAt.getTime()).toBe(later.getTime());
  });

  it('throttle: a later window makes a new job; another key, type or queue is its own', async () => {
    const a = await one(keyed('throttle', { throttleMs: 1 }));
    await new Promise((res) => setTimeout(res, 5));
    const b = await one(keyed('throttle', { throttleMs: 1 }));
    expect(a.created && b.created).toBe(true);
    expect(b.job.id).not.toBe(a.job.id);
    const others = await Promise.all([
      one(keyed('throttle', { jobKey: 'other' })),
      one(keyed('throttle', { type: 'u' })),
      one(keyed('throttle', { queue: 'q2' })),
    ]);
    expect(others.map((r) => r.created)).toEqual([true, true, true]);
  });

  it('replace: the key is scoped per queue and type', async () => {
    const a = await one(keyed('replace'));
    const others = [await one(keyed('replace', { type: 'u' })), await one(keyed('replace', { queue: 'q2' }))];
    expect(others.map((r) => r.created)).toEqual([true, true]);
    expect(new Set([a, ...others].map((r) => r.job.id)).size).toBe(3);
  });
});

describe('concurrent enqueues of one key make one job', () => {
  for (const mode of ['replace', 'debounce', 'throttle'] as const) {
    it(`${mode}: two at once on two connections, five times over`, async () => {
      for (let round = 0; round < 5; round++) {
        const key = `race-${round}`;
        const rs = await Promise.all([0, 1].map((i) => one(keyed(mode, { jobKey: key, payload: { i } }))));
        expect(rs.filter((r) => r.created)).toHaveLength(1);
        expect(new Set(rs.map((r) => r.job.id)).size).toBe(1);
      }
      expect(await count()).toBe(5);
    });

    it(`${mode}: eight transactions holding their enqueue open`, async () => {
      const rs = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          inTransaction(sql, async (c) => {
            const [r] = await store.enqueueResults([keyed(mode, { jobKey: 'tx', payload: { i } })], { client: c });
            await new Promise((res) => setTimeout(res, 20));
            return r!;
          }),
        ),
      );
      expect(rs.filter((r) => r.created)).toHaveLength(1);
      expect(new Set(rs.map((r) => r.job.id)).size).toBe(1);
      expect(await count()).toBe(1);
    });
  }
});

describe('a claimed keyed job going back to waiting while a newer job holds its key', () => {
  it('retry: both jobs wait, the newer keeps the key', async () => {
    const a = (await one(keyed('replace', { payload: { v: 'a' } }))).job;
    const leased = await claim();
    expect(leased.id).toBe(a.id);
    expect(leased.jobKey).toBeNull();
    const b = await one(keyed('replace', { payload: { v: 'b' } }));
    expect(b.created).toBe(true);
    expect(await store.complete([{ ...lease(leased), status: 'retry_wait', error: 'boom', retryDelayMs: 0 }])).toEqual([true]);
    await store.promoteDue();
    expect(await store.getById(a.id)).toMatchObject({ status: 'queued', jobKey: null });
    expect(await store.getById(b.job.id)).toMatchObject({ status: 'queued', jobKey: 'k' });
    // The key now names b alone: a replace updates b.
    const c = await one(keyed('replace', { payload: { v: 'c' } }));
    expect(c).toMatchObject({ created: false, job: { id: b.job.id, payload: { v: 'c' } } });
  });

  it('snooze and a lost lease: no conflict, and the key names one pending job', async () => {
    const a = (await one(keyed('replace'))).job;
    const leased = await claim();
    const b = (await one(keyed('replace'))).job;
    expect(b.id).not.toBe(a.id);
    expect((await store.snooze(lease(leased), 0)).status).toBe('snoozed');
    expect(await store.getById(a.id)).toMatchObject({ status: 'queued', jobKey: null });
    // b is older (FIFO): claimed next; nothing pending holds the key then, so a replace makes c.
    const again = await claim();
    expect(again.id).toBe(b.id);
    const c = await one(keyed('replace'));
    expect(c.created).toBe(true);
    await sql.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [again.id]);
    expect((await store.reapExpired()).map((r) => r.id)).toEqual([b.id]);
    await sql.query(`UPDATE q_jobs SET run_at = now() WHERE id = $1`, [b.id]);
    await store.promoteDue();
    expect(await store.getById(b.id)).toMatchObject({ status: 'queued', jobKey: null });
    const holders = await sql.query<{ id: string }>(`SELECT id FROM q_jobs WHERE job_key = 'k' AND status IN ('queued', 'scheduled')`);
    expect(holders.rows.map((r) => Number(r.id))).toEqual([c.job.id]);
    expect(await count()).toBe(3);
  });
});

describe('batches and the caller transaction', () => {
  it('two jobs of one batch with one key: one job, the later one wins', async () => {
    const rs = await store.enqueueResults([
      keyed('replace', { payload: { v: 1 } }),
      { queue: 'default', type: 't', payload: { plain: true } },
      keyed('replace', { payload: { v: 2 } }),
      keyed('throttle', { jobKey: 'th' }),
      keyed('throttle', { jobKey: 'th' }),
      { queue: 'default', type: 't', idempotencyKey: 'idem' },
    ]);
    expect(rs.map((r) => r.created)).toEqual([true, true, false, true, false, true]);
    expect(rs[0]!.job.id).toBe(rs[2]!.job.id);
    expect(rs[2]!.job.payload).toEqual({ v: 2 });
    expect(rs[3]!.job.id).toBe(rs[4]!.job.id);
    expect(rs[5]!.job.idempotencyKey).toBe('idem');
    expect(await count()).toBe(4);
    expect((await store.getById(rs[0]!.job.id))!.payload).toEqual({ v: 2 });
  });

  it("in the caller's transaction: the job exists iff it commits", async () => {
    await expect(
      inTransaction(sql, async (c) => {
        await store.enqueue([keyed('replace')], { client: c });
        throw new Error('rollback');
      }),
    ).rejects.toThrow('rollback');
    expect(await count()).toBe(0);
    const r = await inTransaction(sql, async (c) => (await store.enqueueResults([keyed('debounce')], { client: c }))[0]!);
    expect(r.created).toBe(true);
    expect(await store.getById(r.job.id)).toMatchObject({ jobKey: 'k' });
  });

  it("a throttled enqueue in an aborted caller's transaction fails with a QError, never a raw one", async () => {
    let thrown: unknown;
    await inTransaction(sql, async (c) => {
      await c.query('SELECT 1/0').catch(() => undefined); // the caller's transaction is now aborted
      thrown = await store.enqueue([keyed('throttle', { throttleMs: 60_000 })], { client: c }).then(
        () => undefined,
        (e: unknown) => e,
      );
    }).catch(() => undefined);
    expect(isQError(thrown)).toBe(true);
    expect(await count()).toBe(0);
  });
});

describe('bad options are refused before anything is written', () => {
  const bad: Array<[string, Record<string, unknown>, RegExp]> = [
    ['empty key', { jobKey: '' }, /^enqueue: jobKey must be a non-empty string/],
    ['non-string key', { jobKey: 5 }, /^enqueue: jobKey must be a non-empty string/],
    ['unknown mode', { jobKey: 'k', jobKeyMode: 'debounced' }, /^enqueue: jobKeyMode must be one of replace, debounce, throttle/],
    ['mode without key', { jobKeyMode: 'replace' }, /^enqueue: jobKeyMode must come with a jobKey/],
    ['window without key', { throttleMs: 5 }, /^enqueue: throttleMs must come with a jobKey/],
    ['throttle without window', { jobKey: 'k', jobKeyMode: 'throttle' }, /^enqueue: throttleMs must be an integer from 1/],
    ['zero window', { jobKey: 'k', jobKeyMode: 'throttle', throttleMs: 0 }, /^enqueue: throttleMs must be an integer from 1/],
    ['fractional window', { jobKey: 'k', jobKeyMode: 'throttle', throttleMs: 1.5 }, /^enqueue: throttleMs must be an integer from 1/],
    ['window with replace', { jobKey: 'k', throttleMs: 5 }, /^enqueue: throttleMs must come with jobKeyMode throttle/],
    ['with an idempotency key', { jobKey: 'k', idempotencyKey: 'i' }, /^enqueue: jobKey must not come with an idempotencyKey/],
    ['too long', { jobKey: 'x'.repeat(2000) }, /^enqueue: jobKey must be at most 1984 bytes/],
  ];
  for (const [name, opts, message] of bad) {
    it(name, async () => {
      const err = await store.enqueue([{ queue: 'default', type: 't', ...opts } as NewJob]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isQError(err) && err.code === QErrorCode.INVALID_ARGUMENT).toBe(true);
      expect((err as Error).message).toMatch(message);
      expect(await count()).toBe(0);
    });
  }
});

describe('q_enqueue_job takes job keys', () => {
  const call = async (payload: unknown, options: unknown) =>
    (
      await sql.query<{ id: string; payload: unknown; status: string; job_key: string | null }>(
        'SELECT id, payload, status::text, job_key FROM q_enqueue_job($1, $2, $3::jsonb, $4::jsonb)',
        ['default', 't', JSON.stringify(payload), JSON.stringify(options)],
      )
    ).rows[0]!;

  it('replace and debounce update the pending job; throttle returns the window job; a claim frees the key', async () => {
    const a = await call({ v: 1 }, { jobKey: 'k', runAt: LATER().toISOString() });
    expect(a).toMatchObject({ status: 'scheduled', job_key: 'k' });
    const b = await call({ v: 2 }, { jobKey: 'k', jobKeyMode: 'debounce' });
    expect(b).toMatchObject({ id: a.id, payload: { v: 2 }, status: 'scheduled' });
    const c = await call({ v: 3 }, { jobKey: 'k' });
    expect(c).toMatchObject({ id: a.id, payload: { v: 3 }, status: 'queued' });
    // The store sees the same key: its replace updates the same job.
    expect(await one(keyed('replace', { payload: { v: 4 } }))).toMatchObject({ created: false, job: { id: Number(a.id) } });
    await claim();
    const d = await call({ v: 5 }, { jobKey: 'k' });
    expect(d.id).not.toBe(a.id);
    const t1 = await call({}, { jobKey: 'tk', jobKeyMode: 'throttle', throttleMs: WIDE });
    const t2 = await call({}, { jobKey: 'tk', jobKeyMode: 'throttle', throttleMs: WIDE });
    expect(t2.id).toBe(t1.id);
    // The same window as the store's throttle of the key.
    expect(await one(keyed('throttle', { jobKey: 'tk' }))).toMatchObject({ created: false, job: { id: Number(t1.id), jobKey: 'tk' } });
    expect(await count()).toBe(3);
  });

  it('refuses bad job key options with 22023', async () => {
    for (const options of [
      { jobKey: '' },
      { jobKeyMode: 'replace' },
      { jobKey: 'k', jobKeyMode: 'later' },
      { jobKey: 'k', jobKeyMode: 'throttle' },
      { jobKey: 'k', throttleMs: 5 },
      { jobKey: 'k', idempotencyKey: 'i' },
    ]) {
      await expect(call({}, options), JSON.stringify(options)).rejects.toMatchObject({ code: '22023' });
    }
    expect(await count()).toBe(0);
  });
});
