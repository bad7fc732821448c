// Smoke tests of q on PostgreSQL 13, the oldest version migrate() accepts (issue 18): every
// module migrates (current schema and the `schema` option) and the job, request and quota paths
// work end to end. Skips, loudly, only where the 13 binaries are not installed (not linux-x64).
import { randomBytes } from 'node:crypto';
import { DeadLetterError, JobQueue } from '@q/job-worker';
import { runPartitionWorker } from '@q/partition-consumer';
import { createQuota } from '@q/quota';
import { MIGRATION_MODULES, bundledMigrations, migrate } from '@q/schema';
import { JobStore, RequestStore } from '@q/store';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { locatePg13, startPg13, type Pg13Server } from '../src/index.js';

const lookup = await locatePg13();
if (!lookup.found) {
  const reason = lookup.reason;
  console.warn(`!!! SKIPPING the PostgreSQL 13 smoke tests: ${reason}`);
  describe('PostgreSQL 13 binaries', () => {
    it.skip(`absent: ${reason}`, () => undefined);
  });
}

const SCHEMA = 'q_pg13';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor<T>(check: () => Promise<T> | T, timeoutMs: number, what: string): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

describe.runIf(lookup.found)('on PostgreSQL 13', () => {
  let server: Pg13Server;
  let admin: pg.Pool;
  const log: string[] = [];

  beforeAll(async () => {
    if (!lookup.found) return;
    const started = Date.now();
    server = await startPg13(lookup.binaries, (l) => log.push(l));
    admin = new pg.Pool({ connectionString: server.dsn, max: 3 });
    console.log(`versions suite: ${lookup.binaries.version} started in ${Date.now() - started} ms`);
  });
  afterAll(async () => {
    await admin?.end();
    await server?.stop();
  });

  const objects = async (schema: string) => {
    const { rows } = await admin.query<{ kind: string; name: string }>(
      `SELECT 'table' AS kind, c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')
       UNION ALL
       SELECT 'function', p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
       ORDER BY 1, 2`,
      [schema],
    );
    return rows.map((r) => `${r.kind} ${r.name}`);
  };
  const journal = async (schema: string) =>
    (await admin.query<{ module: string; tag: string }>(`SELECT module, tag FROM "${schema}".q_schema_migrations ORDER BY module, tag`)).rows;
  const shipped = MIGRATION_MODULES.flatMap((m) => bundledMigrations(m).map((b) => ({ module: m, tag: b.tag }))).sort((a, b) =>
    a.module === b.module ? a.tag.localeCompare(b.tag) : a.module.localeCompare(b.module),
  );

  it('is a PostgreSQL 13 server', async () => {
    const { rows } = await admin.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`);
    expect(Number(rows[0]!.v)).toBeGreaterThanOrEqual(130_000);
    expect(Number(rows[0]!.v)).toBeLessThan(140_000);
  });

  it('migrate: every module into the current schema, then again as a no-op', async () => {
    await migrate(admin, { modules: [...MIGRATION_MODULES] });
    expect(await journal('public')).toEqual(shipped);
    const created = await objects('public');
    for (const t of ['q_jobs', 'q_leader_leases', 'q_requests', 'q_results', 'q_schema_migrations']) expect(created).toContain(`table ${t}`);
    expect(created.filter((o) => o.startsWith('function ')).length).toBeGreaterThan(0);
    await migrate(admin, { modules: [...MIGRATION_MODULES] });
    expect(await journal('public')).toEqual(shipped);
    expect(await objects('public')).toEqual(created);
  });

  it('migrate with the schema option: the same objects in that schema, created if missing', async () => {
    await migrate(admin, { modules: [...MIGRATION_MODULES], schema: SCHEMA });
    expect(await journal(SCHEMA)).toEqual(shipped);
    expect(await objects(SCHEMA)).toEqual(await objects('public'));
    await migrate(admin, { modules: [...MIGRATION_MODULES], schema: SCHEMA });
    expect(await journal(SCHEMA)).toEqual(shipped);
  });

  it('jobs: JobQueue.open + work run, succeed, retry and dead-letter; get and list see them', async () => {
    const queue = await JobQueue.open(server.dsn, {
      schema: SCHEMA,
      maxConns: 4,
      worker: { retryBaseMs: 100, pollIntervalMs: 50, maintenanceIntervalMs: 100, leaseDurationMs: 5_000 },
    });
    const attempts = new Map<string, number>();
    try {
      queue.work('ok', async (job) => ({ doubled: (job.payload as { n: number }).n * 2 }));
      queue.work('flaky', async (job) => {
        if (job.attempt < 2) throw new Error('first attempt fails');
        return 'second time';
      });
      queue.work('broken', async (job) => {
        attempts.set(job.uuid, (attempts.get(job.uuid) ?? 0) + 1);
        throw new Error('always fails');
      });
      queue.work('fatal', async () => {
        throw new DeadLetterError('give up now');
      });
      const ok = await queue.enqueueMany(Array.from({ length: 20 }, (_, n) => ({ type: 'ok', payload: { n }, teamId: 13 })));
      const flaky = await queue.enqueue({ type: 'flaky', teamId: 13 });
      const broken = await queue.enqueue({ type: 'broken', maxAttempts: 2, teamId: 13 });
      const fatal = await queue.enqueue({ type: 'fatal', maxAttempts: 5, teamId: 13 });
      const all = [...ok, flaky, broken, fatal];
      const final = new Set(['succeeded', 'dead_letter']);
      await waitFor(
        async () => (await Promise.all(all.map((j) => queue.get(j.uuid)))).every((j) => final.has(j!.status)),
        30_000,
        'jobs finished',
      );

      for (const [n, j] of ok.entries()) {
        expect(await queue.get(j.uuid)).toMatchObject({ status: 'succeeded', attempt: 1, result: { doubled: n * 2 } });
      }
      expect(await queue.get(flaky.uuid)).toMatchObject({ status: 'succeeded', attempt: 2, result: 'second time' });
      expect(await queue.get(broken.uuid)).toMatchObject({
        status: 'dead_letter',
        attempt: 2,
        lastError: expect.stringContaining('always fails'),
      });
      expect(attempts.get(broken.uuid)).toBe(2);
      expect(await queue.get(fatal.uuid)).toMatchObject({ status: 'dead_letter', attempt: 1, lastError: expect.stringContaining('give up now') });

      const seen: string[] = [];
      let cursor: string | undefined;
      for (;;) {
        const page = await queue.list({ teamId: 13, limit: 10, ...(cursor ? { cursor } : {}) });
        seen.push(...page.jobs.map((j) => j.uuid));
        if (!page.nextCursor) break;
        cursor = page.nextCursor;
      }
      expect(new Set(seen)).toEqual(new Set(all.map((j) => j.uuid)));
      expect(seen).toHaveLength(all.length);
      const dead = await queue.list({ teamId: 13, status: 'dead_letter' });
      expect(dead.jobs.map((j) => j.uuid).sort()).toEqual([broken.uuid, fatal.uuid].sort());

      // A dead letter retried runs again (and fails again) under the same queue.
      const again = await queue.retryDeadLetter(fatal.uuid);
      expect(again).toMatchObject({ status: 'queued', retryOfId: fatal.id, type: 'fatal' });
      await waitFor(async () => (await queue.get(again.uuid))?.status === 'dead_letter', 30_000, 'retried dead letter ran');
    } finally {
      await queue.close();
    }
    // The rows live in the schema the option named, not in the connection's current schema.
    const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${SCHEMA}".q_jobs_all`);
    expect(rows[0]!.n).toBe(24);
    expect((await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM public.q_jobs`)).rows[0]!.n).toBe(0);
  });

  it('jobs: JobStore.open claims and completes with fencing tokens', async () => {
    const store = await JobStore.open(server.dsn, { schema: SCHEMA, maxConns: 2 });
    try {
      const [job] = await store.enqueue([{ queue: 'direct', type: 'd', payload: { k: 'v' } }]);
      const [lease] = await store.claim({ queues: ['direct'], workerId: 'pg13', limit: 5, leaseMs: 10_000 });
      expect(lease).toMatchObject({ uuid: job!.uuid, status: 'leased', attempt: 1, leasedBy: 'pg13', payload: { k: 'v' } });
      expect(await store.claim({ queues: ['direct'], workerId: 'other', limit: 5, leaseMs: 10_000 })).toEqual([]);
      expect(await store.complete([{ ...lease!, status: 'succeeded', result: { done: true } }])).toHaveLength(1);
      expect(await store.get(job!.uuid)).toMatchObject({ status: 'succeeded', result: { done: true }, leasedBy: null });
    } finally {
      await store.close();
    }
  });

  it('requests: RequestStore.open, enqueue, runPartitionWorker; every result popped once', async () => {
    const store = await RequestStore.open(server.dsn, { maxConns: 4 });
    const stop = new AbortController();
    try {
      const deadline = Math.floor(Date.now() / 1000) + 3600;
      const ids = Array.from({ length: 200 }, (_, i) => `r-${i}`);
      await store.enqueue(
        ids.map((id) => ({
          id,
          token: randomBytes(8).toString('hex'),
          queue: 'pg13',
          deadline,
          envelope: '{}',
          payload: Buffer.from(`payload ${id}`),
        })),
      );
      let retried = false;
      const run = runPartitionWorker({
        store,
        queue: 'pg13',
        owner: 'pg13-a',
        concurrency: 8,
        batchSize: 32,
        leaseTtlMs: 2_000,
        drainTimeoutMs: 1_000,
        pollIntervalMs: 50,
        signal: stop.signal,
        async handle(req) {
          // One request is retried once: the retry path (retryAt) works on 13 too.
          if (req.id === 'r-7' && !retried) {
            retried = true;
            return { retryAt: Math.floor(Date.now() / 1000), envelope: '{"retried":true}' };
          }
          return { result: { route: 'pg13-results', payload: `${req.id}:${Buffer.from(req.payload).toString()}:${req.envelope}` } };
        },
      });
      const popped: { id: string; payload: string }[] = [];
      await waitFor(
        async () => {
          popped.push(...(await store.popResults('pg13-results', Math.floor(Date.now() / 1000), 100)));
          return popped.length >= ids.length;
        },
        60_000,
        'all results popped',
      );
      stop.abort();
      const stats = await run;
      expect(popped.map((r) => r.id).sort()).toEqual([...ids].sort());
      const byId = new Map(popped.map((r) => [r.id, r.payload]));
      expect(byId.get('r-0')).toBe('r-0:payload r-0:{}');
      expect(byId.get('r-7')).toBe('r-7:payload r-7:{"retried":true}');
      expect(retried).toBe(true);
      expect(stats.acked).toBeGreaterThanOrEqual(ids.length);
      expect(stats.abandoned).toBe(0);
      expect(await store.hasRequests('pg13')).toBe(false);
      expect(await store.popResults('pg13-results', Math.floor(Date.now() / 1000), 100)).toEqual([]);
    } finally {
      stop.abort();
      await store.close();
    }
  });

  it('quota: createQuota admits and acquires within the limits; release frees a slot', async () => {
    const quota = await createQuota({ dsn: server.dsn, schema: SCHEMA, ttlMs: 5_000, holderPrefix: 'pg13' });
    try {
      const a = await quota.acquire('slots', 2);
      const b = await quota.acquire('slots', 2);
      expect(a).not.toBeNull();
      expect(b).not.toBeNull();
      expect(await quota.acquire('slots', 2)).toBeNull();
      await a!();
      const c = await quota.acquire('slots', 2);
      expect(c).not.toBeNull();
      await Promise.all([b!(), c!()]);

      const admitted = await Promise.all(Array.from({ length: 8 }, () => quota.admit('rate', 3, 60_000)));
      expect(admitted.filter(Boolean)).toHaveLength(3);
      expect(await quota.admit('rate', 3, 60_000)).toBe(false);
      expect(await quota.admit('other-rate', 3, 60_000)).toBe(true);
      expect(quota.holders).toHaveLength(1);
    } finally {
      await quota.close();
    }
  });
});
