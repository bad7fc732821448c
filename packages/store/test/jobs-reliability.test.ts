import { randomUUID } from 'node:crypto';
// JobStore under hostile input and failures (issue #14): bounded identifiers, a promote that one
// bad row cannot stop, per-lease "written", secrets kept out of errors, no deadlock between
// idempotent batches, every failure a typed QError, JSON-only payloads and oversized writes.
import { QError, isQError } from '@q/schema';
import { useJobStore, type TestSchema } from '@q/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { JobStore, type Job, type JobOutcome, type LeasedJob, type NewJob } from '../src/index.js';

let schema: TestSchema;
let store: JobStore;
const LEASE = 30_000;

useJobStore(
  JobStore,
  { prefix: 'jobsrel', maxConns: 16, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] },
  (t) => ({ schema, store } = t),
);

const claim = (limit = 1, queues = ['default'], workerId = 'w1') => store.claim({ queues, workerId, limit, leaseMs: LEASE });
const lease = (j: LeasedJob) => ({ id: j.id, leaseToken: j.leaseToken });
const count = async () => (await store.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM q_jobs_all')).rows[0]!.n;

/** The error `p` rejects with (fails the test if it resolves). */
async function rejection(p: Promise<unknown> | (() => unknown)): Promise<unknown> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

async function expectCode(p: Promise<unknown> | (() => unknown), code: string): Promise<QError> {
  const err = await rejection(p);
  expect(err, String(err)).toBeInstanceOf(QError);
  expect((err as QError).code, (err as QError).message).toBe(code);
  return err as QError;
}

/** A job whose first lease lapsed and was reaped, then claimed again: returns both leases. */
async function staleAndFresh(): Promise<{ stale: LeasedJob; fresh: LeasedJob }> {
  const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
  const [stale] = await claim();
  await store.pool.query(`UPDATE q_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [job!.id]);
  await store.reapExpired();
  await store.promoteDue();
  const [fresh] = await claim();
  expect(fresh!.id).toBe(stale!.id);
  return { stale: stale!, fresh: fresh! };
}

describe('identifier bounds and a robust promote (#14 item 5)', () => {
  it('queue and type over 2,048 bytes are INVALID_ARGUMENT at enqueue, nothing written', async () => {
    for (const job of [
      { queue: 'q'.repeat(8_001), type: 't' },
      { queue: 'é'.repeat(1_025), type: 't' }, // 2,050 UTF-8 bytes
      { queue: 'default', type: 't'.repeat(2_049) },
      { queue: 'default', type: 't', lockKey: 'k'.repeat(2_049) },
      { queue: 'default', type: 't', idempotencyKey: 'k'.repeat(2_049) },
    ]) {
      const err = await expectCode(store.enqueue([{ queue: 'default', type: 'ok' }, job]), 'INVALID_ARGUMENT');
      expect(err.message).toContain('2048 bytes');
      expect(err.message).toContain('(job 1)');
    }
    expect(await count()).toBe(0);
    // The bound itself is accepted.
    const [ok] = await store.enqueue([{ queue: 'q'.repeat(2_048), type: 't'.repeat(2_048), runAt: new Date(Date.now() + 60_000) }]);
    expect(ok!.status).toBe('scheduled');
  });

  it('a due row whose queue cannot be notified does not stop the table-wide promote', async () => {
    const [a] = await store.enqueue([{ queue: 'default', type: 't', runAt: new Date(Date.now() + 60_000) }]);
    // A row written before the bound existed (or by hand): a queue name pg_notify refuses.
    await store.pool.query(
      `INSERT INTO q_jobs (queue, job_type, status, run_at) VALUES (repeat('x', 9000), 't', 'scheduled', now() - interval '1 minute')`,
    );
    await store.pool.query(`UPDATE q_jobs SET run_at = now() - interval '1 second' WHERE id = $1`, [a!.id]);
    expect(await store.promoteDue()).toBe(2);
    const { rows } = await store.pool.query<{ status: string }>('SELECT status FROM q_jobs_all');
    expect(rows.map((r) => r.status)).toEqual(['queued', 'queued']);
    // maintain (reap + promote) and a release of such a job work too.
    await store.pool.query(`UPDATE q_jobs SET status = 'scheduled', run_at = now() - interval '1 second'`);
    expect((await store.maintain())?.promoted).toBe(2);
    // claim() refuses such a queue name now: lease the row by hand.
    const { rows: held } = await store.pool.query<{ id: string; lease_token: string }>(
      `UPDATE q_jobs SET status = 'running', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 minute'
       RETURNING id, lease_token`,
    );
    const leases = held.map((r) => ({ id: Number(r.id), leaseToken: r.lease_token }));
    expect((await store.release(leases)).sort()).toEqual(leases.map((l) => l.id).sort());
    expect((await store.pool.query(`SELECT 1 FROM q_jobs_all WHERE status = 'queued'`)).rowCount).toBe(2);
  });
});

describe('written per lease (#14 item 11)', () => {
  it('complete: a stale outcome of a job that was claimed again is not reported as written', async () => {
    const { stale, fresh } = await staleAndFresh();
    const outcomes: JobOutcome[] = [
      { ...lease(stale), status: 'succeeded', result: 'stale' },
      { ...lease(fresh), status: 'succeeded', result: 'fresh' },
    ];
    expect(await store.complete(outcomes)).toEqual([false, true]);
    expect((await store.getById(fresh.id))!.result).toBe('fresh');
  });

  it('completeAndClaim: the same, and a lease listed twice is written once', async () => {
    const { stale, fresh } = await staleAndFresh();
    const r = await store.completeAndClaim(
      [
        { ...lease(stale), status: 'dead_letter', error: 'stale' },
        { ...lease(fresh), status: 'succeeded', result: 1 },
        { ...lease(fresh), status: 'succeeded', result: 2 },
      ],
      { queues: ['default'], workerId: 'w1', limit: 1, leaseMs: LEASE },
    );
    expect(r.written).toEqual([false, true, false]);
    expect((await store.getById(fresh.id))!).toMatchObject({ status: 'succeeded', result: 1 });
  });
});

describe('secrets in DSNs (#14 item 14)', () => {
  // The password is "Zq9<c>Xk7" with an unescaped reserved character <c>.
  it.each(['postgres://u:Zq9/Xk7@h/db', 'postgres://u:Zq9#Xk7@h/db', 'postgres://u:Zq9?Xk7@h/db', 'postgresql://u:Zq9?Xk7@h:5432/db?x=1'])(
    'JobStore.open(%s) is UNSUPPORTED_DSN without any part of the password',
    async (dsn) => {
      const err = await expectCode(JobStore.open(dsn), 'UNSUPPORTED_DSN');
      expect(err.message).not.toMatch(/Zq9|Xk7/);
    },
  );

  it.each([
    // A space is taken into the user info, percent-encoded.
    'postgres://u:Zq9 Xk7@127.0.0.1:1/db',
  ])('a DSN that parses into other parts than meant (%s) still reports no part of its password', async (dsn) => {
    const err = await expectCode(JobStore.open(dsn), 'CONNECTION');
    expect(err.message).not.toMatch(/Zq9|Xk7/);
  });

  it.each([
    // "1/Zq9#Xk7" parses as port 1 of host "localhost", path "/Zq9" and fragment "Xk7@127.0.0.1/db":
    // an "@" after the host part, refused before anything connects (issue 34 item 11).
    'postgres://localhost:1/Zq9#Xk7@127.0.0.1/db',
    'postgres://localhost:1/Zq9?Xk7@127.0.0.1/db',
  ])('a DSN with an "@" after its host part (%s) is UNSUPPORTED_DSN and shows no part of its password', async (dsn) => {
    const err = await expectCode(JobStore.open(dsn), 'UNSUPPORTED_DSN');
    expect(err.message).not.toMatch(/Zq9|Xk7/);
  });
});

describe('idempotent batches in different orders (#14 item 15)', () => {
  it('concurrent enqueues of the same 500 keys in opposite and shuffled orders all succeed, one job per key', async () => {
    const keys = Array.from({ length: 500 }, (_, i) => `key-${String(i).padStart(4, '0')}`);
    let seed = 7;
    const rand = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const failures: string[] = [];
    for (let round = 0; round < 3; round++) {
      await store.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys');
      const orders = Array.from({ length: 8 }, (_, c) =>
        c % 4 === 0 ? keys : c % 4 === 1 ? [...keys].reverse() : [...keys].sort(() => rand() - 0.5),
      );
      const settled = await Promise.allSettled(
        orders.map((order) => store.enqueue(order.map((k) => ({ queue: 'default', type: 't', idempotencyKey: k, payload: { k } })))),
      );
      const byKey = new Map<string, string>();
      for (const s of settled) {
        if (s.status === 'rejected') {
          failures.push(String(s.reason));
          continue;
        }
        for (const j of s.value) {
          expect((j.payload as { k: string }).k).toBe(j.idempotencyKey);
          if (!byKey.has(j.idempotencyKey!)) byKey.set(j.idempotencyKey!, j.uuid);
          expect(j.uuid).toBe(byKey.get(j.idempotencyKey!));
        }
      }
      expect(await count()).toBe(500);
    }
    expect(failures).toEqual([]);
  });

  it('a batch over several statements takes its keys in one order too', async () => {
    // 2 × 2,100 keys, opposite orders: three statements each, in one transaction each.
    const keys = Array.from({ length: 4_200 }, (_, i) => `big-${i}`);
    const settled = await Promise.allSettled(
      [keys, [...keys].reverse()].map((order) => store.enqueue(order.map((k) => ({ queue: 'default', type: 't', idempotencyKey: k })))),
    );
    expect(settled.filter((s) => s.status === 'rejected').map((s) => String((s as PromiseRejectedResult).reason))).toEqual([]);
    expect(await count()).toBe(4_200);
    // Alone, such a batch gets its ids in input order although its rows go in in key order.
    await store.pool.query('TRUNCATE q_jobs, q_jobs_archive, q_jobs_idempotency_keys');
    const alone = await store.enqueue([...keys].reverse().map((k) => ({ queue: 'default', type: 't', idempotencyKey: k })));
    expect(alone.map((j) => j.idempotencyKey)).toEqual([...keys].reverse());
    expect(alone.every((j, i) => i === 0 || j.id > alone[i - 1]!.id)).toBe(true);
  });

  it('ids still follow the input order inside a batch (FIFO), whatever the keys', async () => {
    const jobs = await store.enqueue(['zz', 'aa', 'mm'].map((k) => ({ queue: 'default', type: k, idempotencyKey: k })));
    expect(jobs.map((j) => j.type)).toEqual(['zz', 'aa', 'mm']);
    expect(jobs[0]!.id).toBeLessThan(jobs[1]!.id);
    expect(jobs[1]!.id).toBeLessThan(jobs[2]!.id);
    expect((await claim(3)).map((j) => j.type)).toEqual(['zz', 'aa', 'mm']);
  });
});

describe('every failure is a QError (#14 item 16)', () => {
  /** A new job whose row another session holds locked (FOR UPDATE) until `holder.end()`. */
  const lockedJob = async (): Promise<{ job: Job; holder: pg.Client }> => {
    const holder = new pg.Client({ connectionString: schema.dsn });
    await holder.connect();
    try {
      const [job] = await store.enqueue([{ queue: 'default', type: 't' }]);
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM q_jobs WHERE id = $1 FOR UPDATE', [job!.id]);
      return { job: job!, holder };
    } catch (err) {
      await holder.end();
      throw err;
    }
  };

  it('a lock timeout is CONNECTION, not a raw pg error', async () => {
    const url = new URL(schema.dsn);
    url.searchParams.set('options', `${url.searchParams.get('options')} -c lock_timeout=100`);
    const impatient = await JobStore.open(url.toString(), { maxConns: 2, migrate: false });
    const { job, holder } = await lockedJob();
    try {
      const err = await expectCode(impatient.cancel(job.uuid), 'CONNECTION');
      expect(err.message).toContain('cancel');
      expect(err.message).toContain('lock timeout');
    } finally {
      await holder.end();
      await impatient.close();
    }
  });

  it('a connection killed under a statement is CONNECTION', async () => {
    const victim = await JobStore.open(schema.dsn, { maxConns: 2, migrate: false, applicationName: 'q-jobs-victim' });
    const { job, holder } = await lockedJob();
    try {
      const pending = rejection(victim.cancel(job.uuid));
      await new Promise((r) => setTimeout(r, 200));
      await holder.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'q-jobs-victim'`);
      const err = await pending;
      expect(isQError(err, 'CONNECTION'), String(err)).toBe(true);
    } finally {
      await holder.end();
      await victim.close();
    }
  });

  it('out-of-range instants and durations are INVALID_ARGUMENT before any statement', async () => {
    await expectCode(store.enqueue([{ queue: 'default', type: 't', runAt: new Date(-8.64e15) }]), 'INVALID_ARGUMENT');
    await expectCode(store.enqueue([{ queue: 'default', type: 't', runAt: new Date('-010000-01-01T00:00:00Z') }]), 'INVALID_ARGUMENT');
    expect(await count()).toBe(0);
    await store.enqueue([{ queue: 'default', type: 't' }]);
    for (const leaseMs of [1e300, 2 ** 31, Number.MAX_SAFE_INTEGER]) {
      await expectCode(store.claim({ queues: ['default'], workerId: 'w', limit: 1, leaseMs }), 'INVALID_ARGUMENT');
    }
    const [l] = await claim();
    await expectCode(store.heartbeat([lease(l!)], 1e300), 'INVALID_ARGUMENT');
    await expectCode(store.fail(lease(l!), 'boom', 1e300), 'INVALID_ARGUMENT');
    await expectCode(store.fail(lease(l!), 'boom', 2 ** 53), 'INVALID_ARGUMENT');
    await expectCode(store.purgeFinished(1e300), 'INVALID_ARGUMENT');
    expect((await store.getById(l!.id))!.status).toBe('leased');
    // The largest accepted values work.
    expect(await store.heartbeat([lease(l!)], 2 ** 31 - 1)).toHaveLength(1);
    expect(await store.fail(lease(l!), 'later', 100 * 365 * 86_400_000)).toBe(true);
    expect(await store.purgeFinished(100 * 365 * 86_400_000)).toBe(0);
  });

  it('NUL or over-long text in list() and claim() arguments is INVALID_ARGUMENT', async () => {
    for (const filter of [{ queue: 'a\u0000b' }, { type: 'a\u0000b' }, { queue: '\ud800' }, { type: 'x'.repeat(3_000) }]) {
      await expectCode(store.list(filter), 'INVALID_ARGUMENT');
    }
    for (const opts of [
      { queues: ['a\u0000b'], workerId: 'w' },
      { queues: ['default'], workerId: 'w\u0000' },
      { queues: ['default'], workerId: 'w'.repeat(3_000) },
      { queues: ['\udc00'], workerId: 'w' },
    ]) {
      await expectCode(store.claim({ ...opts, limit: 1, leaseMs: LEASE }), 'INVALID_ARGUMENT');
      await expectCode(store.completeAndClaim([], { ...opts, limit: 1, leaseMs: LEASE }), 'INVALID_ARGUMENT');
    }
  });

  it('a payload whose toJSON or getter throws is INVALID_ARGUMENT, without the thrown message', async () => {
    const getter = {};
    Object.defineProperty(getter, 'x', {
      enumerable: true,
      get: () => {
        throw new Error('getter secret');
      },
    });
    const nested = { inner: getter };
    const toJson = {
      toJSON: () => {
        throw new Error('toJSON secret');
      },
    };
    for (const payload of [getter, nested, toJson, [toJson]]) {
      const err = await expectCode(store.enqueue([{ queue: 'default', type: 't', payload }]), 'INVALID_ARGUMENT');
      expect(err.message).toContain('payload');
      expect(err.message).not.toContain('secret');
    }
    expect(await count()).toBe(0);
  });

  it('a payload over 64 MiB is INVALID_ARGUMENT naming its size', async () => {
    const err = await expectCode(store.enqueue([{ queue: 'default', type: 't', payload: 'x'.repeat(64 * 1024 * 1024) }]), 'INVALID_ARGUMENT');
    expect(err.message).toMatch(/64 MiB/);
    expect(err.message).toMatch(/67108866 bytes/);
    expect(await count()).toBe(0);
  });

  it('the listener reports a lost connection as a CONNECTION QError', async () => {
    const s = await JobStore.open(schema.dsn, { maxConns: 1, migrate: false, applicationName: 'q-jobs-listen-victim' });
    const errors: unknown[] = [];
    const listener = s.listen({ onNotification: () => undefined, onError: (err) => errors.push(err) });
    try {
      await listener.start();
      expect(listener.connected).toBe(true);
      await store.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'q-jobs-listen-victim'`);
      for (let i = 0; i < 100 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(errors.length).toBeGreaterThan(0);
      expect(isQError(errors[0], 'CONNECTION'), String(errors[0])).toBe(true);
    } finally {
      await s.close();
    }
  });

  it('after close every call is CLOSED', async () => {
    const s = await JobStore.open(schema.dsn, { maxConns: 1, migrate: false });
    await s.close();
    await expectCode(s.list(), 'CLOSED');
    await expectCode(s.enqueue([{ queue: 'default', type: 't' }]), 'CLOSED');
  });
});

describe('only what JSON carries (#14 item 17)', () => {
  it.each([
    ['Map', new Map([['a', 1]])],
    ['nested Set', { s: new Set([1]) }],
    ['WeakMap', { w: new WeakMap() }],
    ['RegExp', [/x/]],
    ['typed array', { b: new Uint8Array([1, 2]) }],
    ['lone surrogate', { s: '\ud800' }],
  ])('a %s payload is INVALID_ARGUMENT, nothing written', async (_name, payload) => {
    const err = await expectCode(store.enqueue([{ queue: 'default', type: 't', payload }]), 'INVALID_ARGUMENT');
    expect(err.message).toContain('payload');
    expect(await count()).toBe(0);
  });

  it('NUL in a result or an error, or a Map result, is INVALID_ARGUMENT and writes nothing', async () => {
    await store.enqueue([{ queue: 'default', type: 't' }]);
    const [l] = await claim(1, ['default'], 'w1');
    await expectCode(store.succeed(lease(l!), { s: 'a\u0000b' }), 'INVALID_ARGUMENT');
    await expectCode(store.succeed(lease(l!), { m: new Map([[1, 2]]) }), 'INVALID_ARGUMENT');
    await expectCode(store.fail(lease(l!), 'a\u0000b', 1_000), 'INVALID_ARGUMENT');
    await expectCode(store.fail(lease(l!), 'a\u0000b', null), 'INVALID_ARGUMENT');
    await expectCode(
      store.completeAndClaim([{ ...lease(l!), status: 'cancelled', error: '\u0000' }], {
        queues: ['default'],
        workerId: 'w1',
        limit: 1,
        leaseMs: LEASE,
      }),
      'INVALID_ARGUMENT',
    );
    const job = (await store.getById(l!.id))!;
    expect(job).toMatchObject({ status: 'leased', result: null, lastError: null });
    // Text that JSON and Postgres carry verbatim still round-trips.
    expect(await store.fail(lease(l!), 'tab\t🙂 \ufffd', null)).toBe(true);
    expect((await store.getById(l!.id))!.lastError).toBe('tab\t🙂 \ufffd');
  });
});

describe('writes over the statement size (#14 item 23)', () => {
  // Five payloads of 60 M characters of JSON text: ~300 M characters in all, ~600 M once escaped
  // into one array parameter (each `\"` of the JSON doubles), more than one string may hold.
  const quotes = (i: number) => ({ i, s: '"'.repeat(30_000_000) });
  // Three payloads of 25 M characters: more than one statement carries, less than one call may.
  const xs = (i: number) => ({ i, s: 'x'.repeat(25_000_000) });

  it('a batch over 256 Mi characters of JSON is INVALID_ARGUMENT naming its size, nothing written', async () => {
    const err = await expectCode(
      store.enqueue(Array.from({ length: 5 }, (_, i) => ({ queue: 'default', type: 't', payload: quotes(i) }))),
      'INVALID_ARGUMENT',
    );
    expect(err.message).toContain(`holds ${5 * (30_000_000 * 2 + 14)} characters`);
    expect(err.message).toContain('256 Mi');
    expect(await count()).toBe(0);
    await store.enqueue(Array.from({ length: 5 }, () => ({ queue: 'default', type: 't' })));
    const leased = await claim(5);
    const outcomes = leased.map((l, i) => ({ ...lease(l), status: 'succeeded' as const, result: quotes(i) }));
    await expectCode(store.complete(outcomes), 'INVALID_ARGUMENT');
    await expectCode(store.completeAndClaim(outcomes, { queues: ['default'], workerId: 'w1', limit: 1, leaseMs: LEASE }), 'INVALID_ARGUMENT');
    expect((await store.list({ status: 'leased' })).jobs).toHaveLength(5);
  }, 120_000);

  it('a batch over one statement is split, in one transaction: all or none', async () => {
    const jobs: NewJob[] = Array.from({ length: 3 }, (_, i) => ({ queue: 'default', type: 't', payload: xs(i), idempotencyKey: `x${i}` }));
    jobs.push({ queue: 'default', type: 't', retryOfId: 999_999 });
    await expectCode(store.enqueue(jobs), 'INVALID_ARGUMENT');
    expect(await count()).toBe(0);
    const out = await store.enqueue(jobs.slice(0, 3));
    expect(out.map((j) => (j.payload as { i: number }).i)).toEqual([0, 1, 2]);
    expect(out[0]!.id).toBeLessThan(out[1]!.id);
    const { rows } = await store.pool.query<{ n: string }>(`SELECT sum(length(payload->>'s'))::text AS n FROM q_jobs_all`);
    expect(rows[0]!.n).toBe(String(3 * 25_000_000));
  }, 120_000);

  it('outcomes over one statement are split and all written', async () => {
    await store.enqueue(Array.from({ length: 3 }, () => ({ queue: 'default', type: 't' })));
    const leased = await claim(3);
    const written = await store.complete(leased.map((l, i) => ({ ...lease(l), status: 'succeeded' as const, result: xs(i) })));
    expect(written).toEqual([true, true, true]);
    const { rows } = await store.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM q_jobs_all WHERE status = 'succeeded' AND length(result->>'s') = 25000000`,
    );
    expect(rows[0]!.n).toBe(3);
  }, 120_000);
});

describe('releaseClaims: a worker gives back what a claim whose reply was lost leased (issue 34 item 6)', () => {
  it("releases exactly the named claims' leases (attempt given back, no crash counted), never those of another claim with the same worker id", async () => {
    await store.enqueue(Array.from({ length: 5 }, () => ({ queue: 'default', type: 't' })));
    const claimed = (limit: number, workerId: string, claimId: string) =>
      store.claim({ queues: ['default'], workerId, limit, leaseMs: LEASE, claimId });
    const lostId = randomUUID();
    const kept = await claimed(1, 'w1', randomUUID());
    const lost = await claimed(2, 'w1', lostId);
    // Another process configured with the same worker id: its claim must survive the reconciliation.
    const twin = await claimed(1, 'w1', randomUUID());
    const other = await claimed(1, 'w2', randomUUID());
    expect(kept.length + lost.length + twin.length + other.length).toBe(5);
    const released = await store.releaseClaims('w1', [lostId]);
    expect(released.sort()).toEqual(lost.map((j) => j.id).sort());
    const { rows } = await store.pool.query<{ id: string; status: string; attempt: number; resume_count: number }>(
      'SELECT id, status::text, attempt, resume_count FROM q_jobs_all ORDER BY id',
    );
    const byId = new Map(rows.map((r) => [Number(r.id), r]));
    for (const j of lost) expect(byId.get(j.id)).toMatchObject({ status: 'queued', attempt: 0, resume_count: 0 });
    for (const j of [...kept, ...twin, ...other]) expect(byId.get(j.id)).toMatchObject({ status: 'leased', attempt: 1 });
    // The survivors' leases still fence as before: their outcomes are written.
    expect(await store.complete([...kept, ...twin].map((j) => ({ ...lease(j), status: 'succeeded' as const, result: null })))).toEqual([
      true,
      true,
    ]);
    // The claim's leases are gone: a second call releases nothing.
    expect(await store.releaseClaims('w1', [lostId])).toEqual([]);
    for (const bad of [() => store.releaseClaims('', [lostId]), () => store.releaseClaims('w1', ['not-a-uuid'])]) {
      expect(isQError(await rejection(bad), 'INVALID_ARGUMENT')).toBe(true);
    }
    expect(isQError(await rejection(() => claimed(1, 'w1', 'x')), 'INVALID_ARGUMENT')).toBe(true);
  });
});
