// `pnpm dashboard`: the dashboard on the embedded default Postgres (data under .q/pgdata, as
// `pnpm demo` keeps it) with demo data in schema q_dashboard_demo, recreated on every start, and a
// little traffic so the pages move: jobs enqueued, run and sometimes dead-lettered, two
// dispatchers sharing a request queue, quota slots and admissions, a flow and a schedule.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startEmbeddedPostgres } from '@q/devdb';
import { Consumer } from '@q/partition-consumer';
import { createQuota } from '@q/quota';
import { migrate } from '@q/schema';
import { JobStore, RequestStore } from '@q/store';
import { createDashboard } from '../src/index.js';

const SCHEMA = 'q_dashboard_demo';
const { values } = parseArgs({ options: { port: { type: 'string', default: '4545' }, host: { type: 'string', default: '127.0.0.1' } } });

const embedded = await startEmbeddedPostgres({ dataDir: path.resolve('.q', 'pgdata') });
const pool = new pg.Pool({ connectionString: embedded.dsn, max: 6 });
await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(pool, { modules: ['jobs', 'requests', 'quota'], schema: SCHEMA });
const jobs = await JobStore.fromPool(pool, { schema: SCHEMA, migrate: false });
const requests = await RequestStore.fromPool(pool, { schema: SCHEMA, migrate: false });
const quota = await createQuota({ pool, schema: SCHEMA, ttlMs: 30_000 });

const QUEUES = { email: ['send', 'digest'], images: ['resize', 'thumbnail'], webhooks: ['deliver'] } as const;
const pick = <T>(a: readonly T[]): T => a[Math.floor(Math.random() * a.length)] as T;
const TENANTS = ['acme', 'globex', 'initech'];

async function enqueueSome(n: number): Promise<void> {
  await jobs.enqueue(
    Array.from({ length: n }, (_, i) => {
      const queue = pick(Object.keys(QUEUES) as (keyof typeof QUEUES)[]);
      return { queue, type: pick(QUEUES[queue]), group: pick(TENANTS), payload: { n: i, to: `user${i}@example.com` } };
    }),
  );
}

/** Runs a few jobs: most succeed with a step timeline, some fail for good, some are left running. */
async function work(): Promise<void> {
  const leased = await jobs.claim({ queues: Object.keys(QUEUES), workerId: 'demo-worker-1', limit: 8, leaseMs: 60_000, start: true });
  for (const job of leased) {
    const t0 = Date.now();
    const steps = [
      { name: 'load', status: 'succeeded' as const, started_at: new Date(t0 - 900).toISOString(), finished_at: new Date(t0 - 600).toISOString() },
      {
        name: 'process',
        status: 'succeeded' as const,
        started_at: new Date(t0 - 600).toISOString(),
        finished_at: new Date(t0 - 100).toISOString(),
      },
      { name: 'save', status: 'succeeded' as const, started_at: new Date(t0 - 100).toISOString(), finished_at: new Date(t0).toISOString() },
    ];
    const r = Math.random();
    if (r < 0.1) await jobs.fail(job, 'upstream answered 500', null, steps.slice(0, 2));
    else if (r < 0.85) await jobs.succeed(job, { ok: true, ms: 900 }, steps);
    // else: left running until its lease lapses
  }
}

await enqueueSome(600);
for (let i = 0; i < 60; i++) await work();
// Spread the seeded finishes over the last hour, so the throughput chart has a history to show.
await pool.query(`UPDATE ${SCHEMA}.q_jobs_archive SET finished_at = now() - random() * interval '58 minutes'`);
await jobs.flows.insert({
  name: 'onboard-tenant',
  nodes: [
    { ref: 'create-account', type: 'send', queue: 'email' },
    { ref: 'welcome-email', type: 'send', queue: 'email', dependsOn: ['create-account'] },
    { ref: 'avatar', type: 'resize', queue: 'images', dependsOn: ['create-account'] },
    { ref: 'notify-crm', type: 'deliver', queue: 'webhooks', dependsOn: ['welcome-email', 'avatar'] },
  ],
});
await jobs.upsertSchedule({
  name: 'nightly-digest',
  cron: '0 3 * * *',
  timezone: 'UTC',
  queue: 'email',
  type: 'digest',
  nextFireAt: new Date(Date.now() + 3_600_000),
});
await jobs.upsertSchedule({
  name: 'hourly-cleanup',
  cron: '0 * * * *',
  timezone: 'UTC',
  queue: 'images',
  type: 'thumbnail',
  nextFireAt: new Date(Date.now() + 600_000),
});

const deadline = Math.floor(Date.now() / 1000);
await requests.enqueue(
  Array.from({ length: 300 }, (_, i) => ({
    id: `req-${i}`,
    token: randomBytes(8).toString('hex'),
    queue: 'chat',
    deadline: deadline + (i % 3 === 0 ? 30 : i % 3 === 1 ? 300 : 3600),
    envelope: JSON.stringify({ i }),
    payload: Buffer.from(`request ${i}`),
  })),
);
const dispatchers = ['dispatcher-a', 'dispatcher-b'].map(
  (owner) => new Consumer(requests, 'chat', owner, { leaseTtlMs: 30_000, drainTimeoutMs: 0 }),
);
async function rebalance(): Promise<void> {
  const now = await requests.now();
  for (let i = 0; i < 3; i++) for (const d of dispatchers) await d.rebalance(now);
}
await rebalance();
await dispatchers[0]?.poll(await requests.now(), 12);

const releases = [await quota.acquire('tenant:acme', 8), await quota.acquire('tenant:acme', 8), await quota.acquire('tenant:globex', 4)];
for (let i = 0; i < 7; i++) await quota.admit('tenant:acme:rpm', 60, 60_000);

const token = randomBytes(16).toString('hex');
const dashboard = await createDashboard({ pool, schema: SCHEMA, showPayloads: true, actions: { token } });
const server = http.createServer((req, res) => void dashboard.handle(req, res));
await new Promise<void>((resolve) => server.listen(Number(values.port), values.host, resolve));
process.stdout.write(
  `q dashboard (demo data in schema ${SCHEMA}) on http://${values.host}:${values.port}/\naction token for this run: ${token}\nCtrl-C stops.\n`,
);

const timer = setInterval(() => {
  void (async () => {
    await enqueueSome(5);
    await work();
    await rebalance();
    await quota.admit(`tenant:${pick(TENANTS)}:rpm`, 60, 60_000);
  })().catch((err: unknown) => process.stderr.write(`demo traffic: ${String(err)}\n`));
}, 2000);

await new Promise<void>((resolve) => {
  process.once('SIGINT', resolve);
  process.once('SIGTERM', resolve);
});
clearInterval(timer);
const closed = new Promise<void>((resolve) => server.close(() => resolve()));
server.closeAllConnections();
await closed;
for (const r of releases) await r?.();
await dashboard.close();
for (const d of dispatchers) await d.close();
await quota.close();
await requests.close();
await jobs.close();
await pool.end();
await embedded.stop();
