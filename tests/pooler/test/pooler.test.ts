// q through Debian's PgBouncer in TRANSACTION mode (1.18: no prepared-statement tracking), the
// setup issue 18 found unusable: jobs (two worker processes, exactly one maintenance leader),
// requests (two partition workers) and quota (two clients), every store opened with
// `pooler: 'transaction'` and its schema chosen per role (`ALTER ROLE … SET search_path`).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Scheduler } from '@q/job-worker';
import { runPartitionWorker } from '@q/partition-consumer';
import { createQuota } from '@q/quota';
import { migrate } from '@q/schema';
import { JobStore, RequestStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPgBouncer, type PgBouncer } from '../src/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '../../..');

let schema: TestSchema;
let bouncer: PgBouncer;
let admin: pg.Pool;
let role: string;
let dsn: string;

beforeAll(async () => {
  schema = await createTestSchema('pool');
  const server = new URL(schema.serverDsn);
  const password = decodeURIComponent(server.password);
  admin = new pg.Pool({ connectionString: schema.serverDsn, max: 2 });
  role = `${schema.name}_app`;
  await admin.query(`CREATE ROLE "${role}" LOGIN${password ? ` PASSWORD '${password.replace(/'/g, "''")}'` : ''}`);
  await admin.query(`GRANT USAGE, CREATE ON SCHEMA "${schema.name}" TO "${role}"`);
  // Behind a pooler the schema comes from the role (startup options are refused), see docs/deployment.md.
  await admin.query(`ALTER ROLE "${role}" SET search_path = "${schema.name}"`);
  bouncer = await startPgBouncer({
    serverUrl: schema.serverDsn,
    users: [
      { name: decodeURIComponent(server.username), password },
      { name: role, password },
    ],
  });
  dsn = bouncer.dsn(role);
  console.log(`pooler suite: ${bouncer.version}, pool_mode = transaction, default_pool_size = 6`);
});
afterAll(async () => {
  await bouncer?.stop();
  await admin?.query(`DROP SCHEMA IF EXISTS "${schema.name}" CASCADE`);
  await admin?.query(`DROP OWNED BY "${role}" CASCADE`).catch(() => undefined);
  await admin?.query(`DROP ROLE IF EXISTS "${role}"`);
  await admin?.end();
  await schema?.drop().catch(() => undefined);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor<T>(check: () => Promise<T> | T, timeoutMs: number, what: string): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(100);
  }
}

describe('the harness', () => {
  it('is transaction pooling without prepared-statement tracking: named statements break, unnamed ones do not', async () => {
    const pools = Array.from({ length: 8 }, () => new pg.Pool({ connectionString: dsn, max: 1 }));
    const run = (named: boolean) =>
      Promise.all(
        pools.map(async (p, i) => {
          const errors: string[] = [];
          for (let k = 0; k < 40; k++) {
            const q = named ? { name: `q_probe_${i}`, text: 'SELECT $1::int AS n', values: [k] } : { text: 'SELECT $1::int AS n', values: [k] };
            await p.query(q).catch((e: { code?: string }) => errors.push(e.code ?? 'none'));
          }
          return errors;
        }),
      );
    try {
      const namedErrors = (await run(true)).flat();
      expect(namedErrors.length).toBeGreaterThan(0);
      expect(namedErrors.every((c) => c === '26000' || c === '42P05')).toBe(true);
      expect((await run(false)).flat()).toEqual([]);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it("refuses a DSN schema option (startup options); the role's search_path chooses the schema instead", async () => {
    const u = new URL(dsn);
    u.searchParams.set('options', `-c search_path=${schema.name}`);
    const c = new pg.Client({ connectionString: u.toString() });
    c.on('error', () => undefined);
    await expect(c.connect()).rejects.toThrow(/unsupported startup parameter: options/);
    const p = new pg.Pool({ connectionString: dsn, max: 1 });
    try {
      expect((await p.query<{ s: string }>('SELECT current_schema() AS s')).rows[0]!.s).toBe(schema.name);
      await migrate(p, { modules: ['jobs', 'requests', 'quota'] });
    } finally {
      await p.end();
    }
  });
});

interface Child {
  proc: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
}

async function spawnJobWorker(id: string): Promise<Child> {
  const proc = spawn(process.execPath, ['--conditions=q-source', '--import', 'tsx', path.join(here, '../src/workers/job-process.ts')], {
    cwd: repoRoot,
    env: { ...process.env, Q_DSN: dsn, Q_WORKER_ID: id },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  await waitFor(() => out.includes('ready') || proc.exitCode !== null, 60_000, `worker ${id} ready`);
  if (!out.includes('ready')) throw new Error(`worker ${id} exited: ${out}`);
  return { proc, out: () => out, exited };
}

const jsonLines = (c: Child) =>
  c
    .out()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('through PgBouncer in transaction mode', () => {
  it('leader lease: of two stores on the pooler exactly one leads; release hands over at once; no session state left', async () => {
    const [a, b] = await Promise.all([0, 1].map(() => JobStore.open(dsn, { maxConns: 3, pooler: 'transaction' })));
    try {
      await admin.query(`DELETE FROM "${schema.name}".q_leader_leases`);
      const bids = await Promise.all([a!, b!, a!, b!].map((s, i) => s.acquireLeadership(`lead-${i % 2}`, 10_000)));
      const winners = new Set(bids.filter((x) => x !== null).map((x) => x!.owner));
      expect(winners.size).toBe(1);
      const [winner] = winners;
      const holder = winner === 'lead-0' ? a! : b!;
      const other = winner === 'lead-0' ? 'lead-1' : 'lead-0';
      const lease = bids.find((x) => x !== null)!;
      for (let k = 0; k < 20; k++) expect(await (holder === a ? b! : a!).acquireLeadership(other, 10_000)).toBeNull();
      expect((await holder.renewLeadership(lease, 10_000))?.epoch).toBe(lease.epoch);
      expect(await holder.releaseLeadership(lease)).toBe(true);
      expect((await (holder === a ? b! : a!).acquireLeadership(other, 10_000))?.epoch).toBe(lease.epoch + 1);
      // No session-level lock held by this role's server connections: the lease is a row.
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid WHERE l.locktype = 'advisory' AND s.usename = $1`,
        [role],
      );
      expect(rows[0]!.n).toBe(0);
    } finally {
      await admin.query(`DELETE FROM "${schema.name}".q_leader_leases`);
      await Promise.all([a!.close(), b!.close()]);
    }
  });

  it('jobs: two worker processes run 300 jobs exactly once, without LISTEN; exactly one maintenance leader', async () => {
    const store = await JobStore.open(dsn, { maxConns: 4, pooler: 'transaction' });
    const workers: Child[] = [];
    try {
      await admin.query(`DELETE FROM "${schema.name}".q_leader_leases`); // a fresh election: epoch 1
      expect(store.notifies).toBe(false);
      workers.push(...(await Promise.all([spawnJobWorker('pool-a'), spawnJobWorker('pool-b')])));
      expect(workers.every((w) => w.out().includes('notifies=false'))).toBe(true);
      const jobs = [];
      for (let b = 0; b < 3; b++) jobs.push(...(await store.enqueue(Array.from({ length: 100 }, () => ({ queue: 'pooled', type: 'p' })))));
      // A scheduled job is only promoted by the maintenance leader.
      const [scheduled] = await store.enqueue([{ queue: 'pooled', type: 'p', runAt: new Date(Date.now() + 500) }]);
      await waitFor(
        async () => {
          const { rows } = await admin.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "${schema.name}".q_jobs_all WHERE status = 'succeeded'`,
          );
          return rows[0]!.n === 301;
        },
        60_000,
        'all jobs succeeded',
      );
      const { rows } = await admin.query<{ attempts: number }>(`SELECT max(attempt)::int AS attempts FROM "${schema.name}".q_jobs_all`);
      expect(rows[0]!.attempts).toBe(1);
      const runs = workers.flatMap((w) =>
        jsonLines(w)
          .filter((l) => typeof l.ran === 'string')
          .map((l) => l.ran as string),
      );
      expect(runs).toHaveLength(301);
      expect(new Set(runs).size).toBe(301);
      expect(new Set(runs)).toContain(scheduled!.uuid);
      expect(jobs).toHaveLength(300);
      const leases = await admin.query<{ owner: string; epoch: number }>(
        `SELECT owner, epoch::int AS epoch FROM "${schema.name}".q_leader_leases`,
      );
      expect(leases.rows).toHaveLength(1);
      expect(['pool-a', 'pool-b']).toContain(leases.rows[0]!.owner);
      expect(leases.rows[0]!.epoch).toBe(1);
      const acquired = workers.flatMap((w) => jsonLines(w).filter((l) => l.msg === 'maintenance leadership acquired'));
      expect(acquired).toHaveLength(1);
      const errors = workers.flatMap((w) => jsonLines(w).filter((l) => l.level === 'error' || l.level === 'fatal'));
      expect(errors).toEqual([]);
      // Nothing of the leadership stays behind in the pool: after both stop, a fresh bid wins at once.
      for (const w of workers) w.proc.kill('SIGTERM');
      expect(await Promise.all(workers.map((w) => w.exited))).toEqual([0, 0]);
      // The other worker's bid may be in flight when the leader hands over, and win: every epoch
      // taken is logged as acquired and released as handed over, by the worker that took it.
      const epochs = (w: Child, msg: string) =>
        jsonLines(w)
          .filter((l) => l.msg === msg)
          .map((l) => l.epoch as number);
      for (const w of workers) expect(epochs(w, 'maintenance handed over')).toEqual(epochs(w, 'maintenance leadership acquired'));
      const taken = workers.flatMap((w) => epochs(w, 'maintenance leadership acquired')).sort((x, y) => x - y);
      expect(taken).toEqual(Array.from({ length: taken.length }, (_, i) => i + 1));
      expect(taken.length).toBeLessThanOrEqual(2);
      const next = await store.acquireLeadership('after', 5_000);
      expect(next?.epoch).toBe(taken.length + 1);
    } finally {
      for (const w of workers) w.proc.kill('SIGKILL');
      await store.close();
    }
  });

  it('schedules: six schedulers on two pooled stores fire each slot of a minute once', async () => {
    const [a, b] = await Promise.all([0, 1].map(() => JobStore.open(dsn, { maxConns: 3, pooler: 'transaction' })));
    try {
      const start = Date.parse('2026-06-01T10:00:00Z');
      await a!.upsertSchedule({
        name: 'pooled',
        cron: '* * * * * *',
        timezone: 'UTC',
        queue: 'sched',
        type: 's',
        nextFireAt: new Date(start + 1_000),
      });
      let now = new Date(start);
      const schedulers = [a!, b!, a!, b!, a!, b!].map((s) => new Scheduler(s, { now: () => now }));
      let advanced = 0;
      for (let ms = 500; ms <= 60_000; ms += 500) {
        now = new Date(start + ms);
        for (const r of await Promise.all(schedulers.map((s) => s.tick()))) advanced += r.fired.length;
      }
      const { rows } = await admin.query<{ slot: string }>(
        `SELECT payload->>'scheduledFor' AS slot FROM "${schema.name}".q_jobs_all WHERE queue = 'sched' ORDER BY id`,
      );
      expect(advanced).toBe(60);
      expect(rows.map((r) => r.slot)).toEqual(Array.from({ length: 60 }, (_, i) => new Date(start + (i + 1) * 1_000).toISOString()));
    } finally {
      await a!.deleteSchedule('pooled');
      await Promise.all([a!.close(), b!.close()]);
    }
  });

  it('requests: two partition workers on two pools drain 1,000 requests, each result written once', async () => {
    const producer = await RequestStore.open(dsn, { maxConns: 4, pooler: 'transaction' });
    const stores = await Promise.all([0, 1].map(() => RequestStore.open(dsn, { maxConns: 4, pooler: 'transaction' })));
    const stop = new AbortController();
    try {
      const deadline = Math.floor(Date.now() / 1000) + 3600;
      for (let b = 0; b < 4; b++) {
        await producer.enqueue(
          Array.from({ length: 250 }, (_, i) => ({
            id: `r-${b}-${i}`,
            token: randomBytes(8).toString('hex'),
            queue: 'pooled',
            deadline,
            envelope: '{}',
            payload: Buffer.from(`p${i}`),
          })),
        );
      }
      const started = Date.now();
      const runs = stores.map((store, i) =>
        runPartitionWorker({
          store,
          queue: 'pooled',
          owner: `disp-${i}`,
          concurrency: 16,
          batchSize: 64,
          leaseTtlMs: 1_500,
          drainTimeoutMs: 1_000,
          pollIntervalMs: 50,
          signal: stop.signal,
          async handle(req) {
            return { result: { route: 'pooled-results', payload: req.id } };
          },
        }),
      );
      await waitFor(
        async () => {
          const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema.name}".q_requests WHERE queue = 'pooled'`);
          return rows[0]!.n === 0;
        },
        60_000,
        'request queue drained',
      );
      const tookMs = Date.now() - started;
      stop.abort();
      const stats = await Promise.all(runs);
      const { rows } = await admin.query<{ n: number; ids: number }>(
        `SELECT count(*)::int AS n, count(DISTINCT id)::int AS ids FROM "${schema.name}".q_results WHERE route = 'pooled-results'`,
      );
      expect(rows[0]).toEqual({ n: 1_000, ids: 1_000 });
      expect(stats.reduce((s, x) => s + x.acked, 0)).toBe(1_000);
      expect(stats.reduce((s, x) => s + x.abandoned, 0)).toBe(0);
      console.log(`pooler suite: 1,000 requests through PgBouncer in ${tookMs} ms`);
    } finally {
      stop.abort();
      await Promise.all([producer, ...stores].map((s) => s.close()));
    }
  });

  it('quota: two clients never grant more than the limit and keep granting (no holder churn)', async () => {
    const clients = await Promise.all([0, 1].map((i) => createQuota({ dsn, ttlMs: 5_000, holderPrefix: `qc${i}`, pooler: 'transaction' })));
    try {
      let inUse = 0;
      let peak = 0;
      let grants = 0;
      const failures: unknown[] = [];
      const until = Date.now() + 3_000;
      await Promise.all(
        Array.from({ length: 24 }, async (_, k) => {
          const q = clients[k % 2]!;
          while (Date.now() < until) {
            try {
              const release = await q.acquire('pooled-key', 3);
              if (!release) {
                await sleep(5);
                continue;
              }
              inUse++;
              grants++;
              peak = Math.max(peak, inUse);
              await sleep(2);
              inUse--;
              await release();
            } catch (err) {
              failures.push(err);
              await sleep(20);
            }
          }
        }),
      );
      expect(failures).toEqual([]);
      expect(peak).toBeLessThanOrEqual(3);
      expect(grants).toBeGreaterThan(50);
      const admitted = await Promise.all(Array.from({ length: 30 }, (_, k) => clients[k % 2]!.admit('pooled-rate', 10, 60_000)));
      expect(admitted.filter(Boolean)).toHaveLength(10);
      // One holder per client: no error retired one and registered another.
      expect(clients.map((c) => c.holders.length)).toEqual([1, 1]);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });
});
