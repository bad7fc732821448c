// Job groups (#40, migration 0011): a group per job, per-group concurrency limits held by the
// claim itself (slots fenced by q_jobs_limit_slot_key), and claims that interleave groups — on
// real Postgres, with claims racing from several stores.
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { METRIC } from '@q/otel';
import { JOURNAL_TABLE, QErrorCode, bundledMigrations, isQError } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { useJobStore, useScratchSchemas, type TestSchema } from '@q/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { JobStore, type ClaimOptions, type LeasedJob, type NewJob } from '../src/index.js';

let schema: TestSchema;
let store: JobStore;
let sql: pg.Pool;
const LEASE = 30_000;

useJobStore(
  JobStore,
  { prefix: 'jobgroups', maxConns: 12, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys', 'q_job_rate_slots'] },
  (t) => {
    ({ schema, store } = t);
    sql = schema.pool();
  },
);

const jobs = (n: number, group: string | null, extra: Partial<NewJob> = {}): NewJob[] =>
  Array.from({ length: n }, (_, i) => ({ queue: 'g', type: 't', payload: { i }, group, ...extra }));
const claimOf = (s: JobStore, opts: Partial<ClaimOptions> = {}): Promise<LeasedJob[]> =>
  s.claim({ queues: ['g'], workerId: 'w', limit: 10, leaseMs: LEASE, ...opts });
const runningPerGroup = async (): Promise<Record<string, number>> => {
  const { rows } = await sql.query<{ g: string | null; n: number }>(
    "SELECT job_group AS g, count(*)::int AS n FROM q_jobs WHERE status IN ('leased', 'running') GROUP BY 1",
  );
  return Object.fromEntries(rows.map((r) => [r.g ?? '(none)', r.n]));
};
const complete = (js: LeasedJob[]) => store.complete(js.map((j) => ({ id: j.id, leaseToken: j.leaseToken, status: 'succeeded' as const })));

/**
 * Runs `body` while another transaction holds the admission locks that a claim under the rule
 * `{ queue }` takes for `groups` (claim-grouped-jobs.ts): as a claim admitting into them would.
 */
async function whileAdmitting(queue: string, groups: string[], body: () => Promise<void>): Promise<void> {
  const other = await sql.connect();
  try {
    await other.query('BEGIN');
    for (const g of groups) {
      await other.query(`SELECT pg_advisory_xact_lock(${0x714c494d}, hashtext(md5($1 || chr(10) || $2)::uuid::text))`, [
        JSON.stringify([queue, null]),
        g,
      ]);
    }
    await body();
  } finally {
    await other.query('ROLLBACK');
    other.release();
  }
}

async function expectInvalid(p: Promise<unknown>, message: RegExp): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isQError(err) && err.code === QErrorCode.INVALID_ARGUMENT, String(err)).toBe(true);
  expect((err as Error).message).toMatch(message);
}

describe("the store's connections", () => {
  it('run without JIT (a claim over a large backlog was compiled on every execution), unless behind a transaction pooler', async () => {
    expect((await store.pool.query<{ jit: string }>('SHOW jit')).rows[0]!.jit).toBe('off');
    const pooled = await JobStore.open(schema.dsn, { maxConns: 1, migrate: false, pooler: 'transaction', schema: schema.name });
    try {
      const server = (await sql.query<{ jit: string }>("SELECT current_setting('jit') AS jit")).rows[0]!.jit;
      expect((await pooled.pool.query<{ jit: string }>('SHOW jit')).rows[0]!.jit).toBe(server);
    } finally {
      await pooled.close();
    }
  });
});

describe('a group per job', () => {
  it('is stored by every way in, and shown by get and list', async () => {
    const [one] = await store.enqueue([{ queue: 'g', type: 't', group: 'tenant:1' }]);
    const many = await store.enqueue([...jobs(2, 'tenant:2'), ...jobs(1, null)]);
    const [keyed] = await store.enqueue([{ queue: 'g', type: 't', group: 'tenant:3', jobKey: 'k' }]);
    const [idem] = await store.enqueue([{ queue: 'g', type: 't', group: 'tenant:4', idempotencyKey: 'i' }]);
    const { rows } = await sql.query<{ job_group: string }>(`SELECT (q_enqueue_job('g', 't', '{}', '{"group": "tenant:5"}')).job_group`);
    expect(rows[0]!.job_group).toBe('tenant:5');
    expect([one!.group, ...many.map((j) => j.group), keyed!.group, idem!.group]).toEqual([
      'tenant:1',
      'tenant:2',
      'tenant:2',
      null,
      'tenant:3',
      'tenant:4',
    ]);
    expect((await store.get(one!.uuid))?.group).toBe('tenant:1');
    const page = await store.list({ queue: 'g', limit: 100 });
    expect(page.jobs.map((j) => j.group).sort()).toEqual(['tenant:1', 'tenant:2', 'tenant:2', 'tenant:3', 'tenant:4', 'tenant:5', null].sort());
    // A claimed and finished job keeps its group (the archive has the column).
    const claimed = await claimOf(store, { limit: 100 });
    expect(claimed.find((j) => j.id === one!.id)?.group).toBe('tenant:1');
    await complete(claimed);
    expect((await store.get(one!.uuid))?.group).toBe('tenant:1');
  });

  it('refuses a bad group before anything is written', async () => {
    const bad: [unknown, RegExp][] = [
      ['x'.repeat(2049), /group is longer than 2048 bytes/],
      ['a\u0000b', /group/],
      ['', /group must be a non-empty string/],
      [42, /group must be a non-empty string/],
    ];
    for (const [group, message] of bad) {
      await expectInvalid(store.enqueue([{ queue: 'g', type: 't', group: group as string }]), message);
      await expectInvalid(store.enqueue([...jobs(3, 'ok'), { queue: 'g', type: 't', group: group as string }]), message);
    }
    for (const group of ['"' + 'x'.repeat(2049) + '"', '""', '7']) {
      await expect(sql.query(`SELECT q_enqueue_job('g', 't', '{}', '{"group": ${group}}')`)).rejects.toMatchObject({ code: '22023' });
    }
    expect((await sql.query('SELECT count(*)::int AS n FROM q_jobs_all')).rows[0].n).toBe(0);
  });
});

describe('per-group concurrency limits', () => {
  it('never lease more of a group than its limit, with claims racing from four stores', async () => {
    const others = await Promise.all([1, 2, 3].map(() => JobStore.open(schema.dsn, { maxConns: 4, migrate: false })));
    try {
      const stores = [store, ...others];
      await store.enqueue([...jobs(60, 'a'), ...jobs(60, 'b'), ...jobs(60, 'c')]);
      const limits = [{ queue: 'g', concurrency: 2 }];
      for (let round = 0; round < 6; round++) {
        const got = await Promise.all(stores.flatMap((s) => [claimOf(s, { limits }), claimOf(s, { limits })]));
        const running = await runningPerGroup();
        expect(running).toEqual({ a: 2, b: 2, c: 2 });
        await complete(got.flat());
      }
    } finally {
      await Promise.all(others.map((s) => s.close()));
    }
  });

  it('lets round trips racing over the same groups complete and claim without a deadlock', async () => {
    // Each claim reads its scopes' slots only once it holds their admission locks (migration
    // 0013). From its statement's snapshot instead, it picked slots a claim committed since had
    // taken, waited on the slot index for the transaction completing that job, which waited on a
    // row the claim had locked: Postgres broke the cycle after deadlock_timeout with CONFLICT.
    const others = await Promise.all([1, 2].map(() => JobStore.open(schema.dsn, { maxConns: 4, migrate: false })));
    try {
      const n = 3_000;
      await store.enqueue(Array.from({ length: n }, (_, i) => ({ queue: 'g', type: 't', payload: { i }, group: `t${i % 30}` })));
      const opts: ClaimOptions = { queues: ['g'], workerId: 'w', limit: 8, leaseMs: LEASE, start: true, limits: [{ concurrency: 2 }] };
      let done = 0;
      const loop = async (s: JobStore): Promise<void> => {
        let held: LeasedJob[] = [];
        for (let idle = 0; idle < 50;) {
          const outcomes = held.map((j) => ({ id: j.id, leaseToken: j.leaseToken, status: 'succeeded' as const }));
          const r = await s.completeAndClaim(outcomes, opts);
          expect(r.written.every(Boolean)).toBe(true);
          done += outcomes.length;
          held = r.jobs;
          idle = held.length === 0 ? idle + 1 : 0;
          if (done >= n && held.length === 0) return;
        }
      };
      await Promise.all([store, ...others].flatMap((s) => [loop(s), loop(s)]));
      expect(done).toBe(n);
      const { rows } = await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM q_jobs_archive WHERE status = 'succeeded'");
      expect(rows[0]!.n).toBe(n);
    } finally {
      await Promise.all(others.map((s) => s.close()));
    }
  });

  it('walks past the groups another claim is admitting into, so two claims sent together take different groups', async () => {
    await store.enqueue(Array.from({ length: 10 }, (_, g) => jobs(3, `g${g}`)).flat());
    const limits = [{ queue: 'g', concurrency: 2 }];
    // Another claim in flight, admitting into g0–g4: it holds their scopes' admission locks.
    await whileAdmitting('g', ['g0', 'g1', 'g2', 'g3', 'g4'], async () => {
      const got = await claimOf(store, { limits, limit: 5 });
      expect(got.map((j) => j.group).sort()).toEqual(['g5', 'g6', 'g7', 'g8', 'g9']);
    });
    // Once it has committed, the next walk goes on from where this one ended, then wraps round.
    const next = await claimOf(store, { limits, limit: 5 });
    expect(next.map((j) => j.group).sort()).toEqual(['g0', 'g1', 'g2', 'g3', 'g4']);
  });

  it('gets past a few groups other claims hold even when it claims one job', async () => {
    await store.enqueue(Array.from({ length: 8 }, (_, g) => ({ queue: 'h', type: 't', payload: { g }, group: `h${g}` })));
    await whileAdmitting('h', ['h0', 'h1', 'h2', 'h3', 'h4', 'h5'], async () => {
      const got = await claimOf(store, { queues: ['h'], limits: [{ queue: 'h', concurrency: 1 }], limit: 1 });
      expect(got.map((j) => j.group)).toEqual(['h6']);
    });
  });

  it('a job over its limit stays queued without using an attempt, and does not hold up other groups', async () => {
    const limits = [{ concurrency: 1 }];
    await store.enqueue(jobs(2, 'busy'));
    const [first] = await claimOf(store, { limits, limit: 1 });
    expect(first!.group).toBe('busy');
    for (let i = 0; i < 1000; i++) expect(await claimOf(store, { limits })).toEqual([]);
    const [other] = await store.enqueue(jobs(1, 'free'));
    const got = await claimOf(store, { limits });
    expect(got.map((j) => j.id)).toEqual([other!.id]);
    const { rows } = await sql.query<{ status: string; attempt: number }>(
      "SELECT status, attempt FROM q_jobs WHERE job_group = 'busy' AND id <> $1",
      [first!.id],
    );
    expect(rows).toEqual([{ status: 'queued', attempt: 0 }]);
    // The slot frees when its job leaves running: finished, or back to waiting.
    await complete([first!]);
    const [next] = await claimOf(store, { limits });
    expect(next).toMatchObject({ group: 'busy', attempt: 1 });
    await store.release([{ id: next!.id, leaseToken: next!.leaseToken }]);
    expect((await claimOf(store, { limits })).map((j) => j.id)).toEqual([next!.id]);
  });

  it('never limits a job without a group, and limits only the jobs its rule matches', async () => {
    await store.enqueue([...jobs(5, null), ...jobs(3, 'x'), ...jobs(3, 'x', { type: 'other' })]);
    const got = await claimOf(store, { limits: [{ type: 't', concurrency: 0 }], limit: 100 });
    expect(got.filter((j) => j.group === null)).toHaveLength(5);
    expect(got.filter((j) => j.group === 'x').map((j) => j.type)).toEqual(['other', 'other', 'other']);
  });

  it('takes a function of the group, admitting a group it has not computed yet at one job', async () => {
    await store.enqueue([...jobs(10, 'big'), ...jobs(10, 'small')]);
    const limits = [{ concurrency: (group: string) => (group === 'big' ? 3 : 1) }];
    const first = await claimOf(store, { limits, limit: 20 });
    expect(first.map((j) => j.group).sort()).toEqual(['big', 'small']);
    await claimOf(store, { limits, limit: 20 });
    expect(await runningPerGroup()).toEqual({ big: 3, small: 1 });
    // A bad result is thrown by the next claim, before it is sent; nothing more is leased.
    await store.enqueue(jobs(2, 'odd'));
    const bad = [{ concurrency: (group: string) => (group === 'odd' ? 0.5 : 1) }];
    await claimOf(store, { limits: bad, limit: 20 });
    await expectInvalid(claimOf(store, { limits: bad, limit: 20 }), /concurrency function must return an integer .* returned 0\.5/);
    expect((await runningPerGroup()).odd).toBe(1);
  });

  it('refuses bad limits and weights', async () => {
    const cases: [Partial<ClaimOptions>, RegExp][] = [
      [{ limits: [{} as never] }, /must have a concurrency or a rate/],
      [{ limits: [{ rate: { limit: 0, windowMs: 1000 } }] }, /rate\.limit must be an integer/],
      [{ limits: [{ rate: { limit: 1, windowMs: 0.5 } }] }, /rate\.windowMs must be an integer/],
      [{ limits: [{ rate: { limit: 1 } as never }] }, /rate\.windowMs must be an integer/],
      [{ limits: [{ concurrency: 1.5 }] }, /concurrency must be an integer/],
      [{ limits: [{ concurrency: -1 }] }, /concurrency must be an integer/],
      [{ limits: [{ concurrency: 1, burst: 3 } as never] }, /must not have unknown option\(s\): burst/],
      [{ limits: [{ queue: '', concurrency: 1 }] }, /queue must be a non-empty string/],
      [{ limits: {} as never }, /limits must be an array/],
      [{ weights: { a: 0 } }, /weights must be integers from 1/],
      [{ fair: 'yes' as never }, /fair must be a boolean/],
    ];
    for (const [opts, message] of cases) await expectInvalid(claimOf(store, opts), message);
  });
});

describe('migration 0013 (slots read under the admission lock) on a database through 0012', () => {
  const scratch = useScratchSchemas({ quoteIdent, journalTable: JOURNAL_TABLE });

  it('counts the slots of jobs leased before the upgrade, and claims with limits from then on', async () => {
    const older = await scratch.olderBuild('jobgroupsup', bundledMigrations('jobs'), '0013');
    const before = await JobStore.open(older.dsn, { maxConns: 2, migrate: false });
    try {
      await before.enqueue(jobs(4, 'a'));
    } finally {
      await before.close();
    }
    // A job leased by a worker of the previous release: slot 0 of group a under the rule below.
    await scratch.admin.query(
      `UPDATE ${older.quoted}.q_jobs SET status = 'leased', leased_by = 'old', lease_token = gen_random_uuid(), attempt = 1,
              lease_expires_at = now() + interval '1 minute', limit_scope = md5($1 || chr(10) || 'a')::uuid, limit_slot = 0
        WHERE id = (SELECT min(id) FROM ${older.quoted}.q_jobs)`,
      [JSON.stringify(['g', null])],
    );
    const upgraded = await JobStore.open(older.dsn, { maxConns: 2 }); // applies 0013
    try {
      const limits = [{ queue: 'g', concurrency: 2 }];
      const held = await claimOf(upgraded, { limits });
      expect(held).toHaveLength(1);
      expect(await claimOf(upgraded, { limits })).toEqual([]);
      await upgraded.complete(held.map((j) => ({ id: j.id, leaseToken: j.leaseToken, status: 'succeeded' as const })));
      expect(await claimOf(upgraded, { limits })).toHaveLength(1);
    } finally {
      await upgraded.close();
    }
  });
});

describe('metrics', () => {
  it('counts grants, refusals and waits per limit, named by its queue and type, never by a group', async () => {
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
    const meterProvider = new MeterProvider({ readers: [reader] });
    const measured = await JobStore.open(schema.dsn, { maxConns: 2, migrate: false, meterProvider });
    try {
      await store.enqueue([...jobs(3, 'tenant:1'), ...jobs(3, 'tenant:2')]);
      const limits = [{ queue: 'g', concurrency: 1 }];
      expect(await claimOf(measured, { limits })).toHaveLength(2);
      expect(await claimOf(measured, { limits })).toHaveLength(0);
      await reader.forceFlush();
      const all = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
      const points = (name: string) => all.find((m) => m.descriptor.name === name)?.dataPoints ?? [];
      const rule = { 'q.limit.queue': 'g', 'q.limit.type': '*' };
      expect(points(METRIC.jobsGroupGrants)).toEqual([expect.objectContaining({ value: 2, attributes: rule })]);
      // The second claim found both groups at their limit (the first read one job of each: their room).
      expect(points(METRIC.jobsGroupRefusals)).toEqual([
        expect.objectContaining({ value: 2, attributes: { ...rule, 'q.limit.kind': 'concurrency' } }),
      ]);
      const wait = points(METRIC.jobsGroupWait);
      expect(wait).toEqual([expect.objectContaining({ attributes: rule })]);
      expect((wait[0]!.value as { count: number }).count).toBe(2);
    } finally {
      await measured.close();
      await meterProvider.shutdown();
    }
  });
});

describe('per-group rate limits', () => {
  it('start at most `limit` jobs of a group per window, with claims racing from four stores; purgeFinished drops spent slots', async () => {
    const others = await Promise.all([1, 2, 3].map(() => JobStore.open(schema.dsn, { maxConns: 4, migrate: false })));
    try {
      const stores = [store, ...others];
      await store.enqueue([...jobs(30, 'a'), ...jobs(30, 'b')]);
      const limits = [{ rate: { limit: 4, windowMs: 1_000 } }];
      const claimedAt: Record<string, number[]> = { a: [], b: [] };
      const deadline = Date.now() + 2_600;
      while (Date.now() < deadline) {
        const got = (await Promise.all(stores.map((s) => claimOf(s, { limits })))).flat();
        // A claim's start is its lease's start: the expiry less the lease, on the database clock.
        for (const j of got) claimedAt[j.group!]!.push(j.leaseExpiresAt!.getTime() - LEASE);
        await complete(got);
        await new Promise((r) => setTimeout(r, 50));
      }
      for (const [group, times] of Object.entries(claimedAt)) {
        times.sort((x, y) => x - y);
        // Three windows began in 2.6 s: 4 starts each, the first at once.
        expect(times.length, group).toBeGreaterThanOrEqual(8);
        expect(times.length, group).toBeLessThanOrEqual(12);
        // Two starts of one slot are more than 1,000 ms apart on the database's microsecond clock;
        // read back in whole ms (a Date) that is at least 1,000.
        for (let i = 4; i < times.length; i++) expect(times[i]! - times[i - 4]!, `${group}: starts ${i - 4}..${i}`).toBeGreaterThanOrEqual(1_000);
      }
    } finally {
      await Promise.all(others.map((s) => s.close()));
    }
    expect((await sql.query('SELECT count(*)::int AS n FROM q_job_rate_slots')).rows[0].n).toBe(8);
    await new Promise((r) => setTimeout(r, 1_100));
    await store.purgeFinished(3_600_000);
    expect((await sql.query('SELECT count(*)::int AS n FROM q_job_rate_slots')).rows[0].n).toBe(0);
  });

  it('holds a rate and a concurrency of one rule together', async () => {
    await store.enqueue(jobs(10, 'a'));
    const limits = [{ concurrency: 2, rate: { limit: 3, windowMs: 60_000 } }];
    const first = await claimOf(store, { limits });
    expect(first).toHaveLength(2);
    await complete(first);
    expect(await claimOf(store, { limits })).toHaveLength(1);
    expect(await claimOf(store, { limits })).toHaveLength(0);
  });
});

describe('fairness', () => {
  it("starts a new group's job within one claim round behind another group's backlog", async () => {
    await store.enqueue(jobs(10_000, 'hot'));
    // The first claim has seen no group yet: it reads the queue in dequeue order.
    const first = await claimOf(store);
    expect(first.every((j) => j.group === 'hot')).toBe(true);
    const [cold] = await store.enqueue(jobs(1, 'cold'));
    const next = await claimOf(store);
    expect(next.map((j) => j.id)).toContain(cold!.id);
  });

  it('interleaves groups round-robin within a priority, by weight, and keeps order across priorities', async () => {
    await store.enqueue([...jobs(20, 'a'), ...jobs(20, 'b'), ...jobs(20, null)]);
    await claimOf(store, { limit: 1 }); // learns that the queue has groups
    const got = await claimOf(store, { limit: 9 });
    const count = (g: string | null) => got.filter((j) => j.group === g).length;
    expect([count('a'), count('b'), count(null)]).toEqual([3, 3, 3]);
    const weighted = await claimOf(store, { limit: 8, weights: { a: 3 } });
    // Weight 3 of 5 (a, b, and the jobs without a group at 1 each) of 8 jobs: 4.8 to a.
    expect(weighted.filter((j) => j.group === 'a').length).toBeGreaterThanOrEqual(4);
    expect(weighted.filter((j) => j.group === 'b').length).toBeLessThanOrEqual(2);
    // A higher priority comes first whatever its group's share.
    const [urgent] = await store.enqueue(jobs(1, 'b', { priority: 5 }));
    const after = await claimOf(store, { limit: 1, weights: { a: 3 } });
    expect(after.map((j) => j.id)).toEqual([urgent!.id]);
  });

  it('can be turned off: fair: false claims in dequeue order', async () => {
    await store.enqueue([...jobs(20, 'a'), ...jobs(5, 'b')]);
    await claimOf(store, { limit: 1, fair: false });
    const got = await claimOf(store, { limit: 10, fair: false });
    expect(got.every((j) => j.group === 'a')).toBe(true);
  });
});
