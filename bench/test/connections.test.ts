import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { testDatabaseUrl } from '@q/testing';
import { runScenario, type HarnessOptions } from '../src/harness.js';
import type { Scenario, System } from '../src/scenario.js';
import { freshDatabase } from '../src/server.js';
import { JOB_SYSTEMS } from '../src/scenarios/jobs.js';
import { qQuotaClient, qQuotaStore, rawSqlQuota } from '../src/systems/quota.js';
import { qRunnerRequests, qStoreRequests } from '../src/systems/q-requests.js';
import { rawSqlRequests } from '../src/systems/raw-requests.js';

/** Harness options for a one-rep smoke run of a made-up scenario; log lines are collected. */
function harness(lines: string[]): HarnessOptions {
  return { serverDsn: testDatabaseUrl(), smoke: true, reps: 1, warmupFraction: 0.1, runTimeoutMs: 60_000, log: (l) => lines.push(l) };
}

function scenario(name: string, systems: System[]): Scenario {
  return { name, title: name, metrics: [{ key: 'x', unit: 'x', better: 'higher' }], baseline: systems[0]?.name ?? '', systems };
}

/** Terminates every backend connected to `database` (what DROP DATABASE … WITH (FORCE) does). */
async function terminateAll(database: string): Promise<number> {
  const c = new pg.Client({ connectionString: testDatabaseUrl() });
  c.on('error', () => undefined);
  await c.connect();
  try {
    const r = await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database]);
    return r.rowCount ?? 0;
  } finally {
    await c.end();
  }
}

describe('the harness and a run’s connections', () => {
  it('drops a run’s database only after the connections of a pool ended just before return are gone (no 57P01 crash)', async () => {
    // A pool without an 'error' listener, as some peers' are: pg-pool's end() resolves once it has
    // *asked* its connections to close, so a drop right after used to kill a still-open backend
    // and crash the process on the unhandled 'error'. 12 reps of an 8-connection pool.
    const lines: string[] = [];
    const system: System = {
      name: 'ends-late',
      async run(ctx) {
        const pool = new pg.Pool({ connectionString: ctx.dsn, max: 8 });
        await Promise.all(Array.from({ length: 8 }, () => pool.query('SELECT pg_sleep(0.01)')));
        await pool.end();
        return { x: 1 };
      },
    };
    for (let i = 0; i < 12; i++) {
      const r = await runScenario(scenario('ends-late', [system]), harness(lines));
      expect(r.systems[0]?.failed, lines.join('\n')).toBeUndefined();
    }
  }, 120_000);

  it('fails a run whose system leaves a connection open, naming the system', async () => {
    const lines: string[] = [];
    let leaked: pg.Pool | undefined;
    const system: System = {
      name: 'leaky',
      async run(ctx) {
        leaked = new pg.Pool({ connectionString: ctx.dsn, max: 2, application_name: 'leaky-probe' });
        leaked.on('error', () => undefined);
        await leaked.query('SELECT 1');
        return { x: 1 };
      },
    };
    const clean: System = { name: 'clean', run: async () => ({ x: 1 }) };
    try {
      const r = await runScenario(scenario('leak', [system, clean]), { ...harness(lines) });
      const leaky = r.systems.find((s) => s.system === 'leaky');
      expect(leaky?.failed).toMatch(/left 1 connection\(s\) to its database open after its run: pid \d+ 'leaky-probe' idle/);
      expect(leaky?.samples).toHaveLength(0);
      expect(lines.some((l) => l.startsWith('[leak] rep 1/1 leaky: LEAKED'))).toBe(true);
      expect(r.systems.find((s) => s.system === 'clean')?.failed).toBeUndefined();
    } finally {
      await leaked?.end().catch(() => undefined);
    }
  }, 60_000);
});

describe('every bench system survives its connections being terminated', () => {
  // What DROP … WITH (FORCE) does to connections still open: each pool and client of a system's
  // handle must take the error (an unhandled 'error' would crash the worker and fail this file).
  const systems: Array<{ name: string; open(dsn: string): Promise<{ touch(): Promise<unknown>; close(): Promise<void> }> }> = [
    ...JOB_SYSTEMS.map((s) => ({
      name: `jobs/${s.name}`,
      open: async (dsn: string) => {
        const h = await s.open(dsn, 4);
        return { touch: () => Promise.all([h.enqueueBatch(0, 5), h.waiting(), h.completed()]), close: () => h.close() };
      },
    })),
    ...[qStoreRequests(), qRunnerRequests(), rawSqlRequests].map((s) => ({
      name: `requests/${s.name}`,
      open: async (dsn: string) => {
        const h = await s.open(dsn, 4);
        return { touch: () => Promise.all([h.enqueue(0, 5), h.stored(), h.results()]), close: () => h.close() };
      },
    })),
    ...[qQuotaClient, qQuotaStore, rawSqlQuota].map((s) => ({
      name: `quota/${s.name}`,
      open: async (dsn: string) => {
        const h = await s.open(dsn, 4);
        return { touch: () => Promise.all([h.admit('k', 5, 60_000), h.inUse('k')]), close: () => h.close() };
      },
    })),
  ];
  for (const s of systems) {
    it(
      s.name,
      async () => {
        const db = await freshDatabase(testDatabaseUrl());
        try {
          const h = await s.open(db.dsn);
          await h.touch();
          expect(await terminateAll(db.name)).toBeGreaterThan(0);
          await new Promise((r) => setTimeout(r, 300)); // let every terminated connection report its error
          await h.close().catch(() => undefined); // a store may reject on dead connections; it must not crash
        } finally {
          await db.drop();
        }
      },
      60_000,
    );
  }
});
