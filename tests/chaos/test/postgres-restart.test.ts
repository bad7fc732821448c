// Scenario 4: the Postgres server crashes (immediate shutdown) and restarts on the same data
// directory mid-run. The processes reconnect by themselves and every invariant holds.
import { startEmbeddedPostgres, type EmbeddedPostgres } from '@q/devdb';
import { dsnWithSchema } from '@q/testing';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { findSecrets, logDir, seedWorkload, sleep, spawnWorkload, waitDrained, workloadViolations } from '../src/index.js';

let server: EmbeddedPostgres;
let dsn: string;
beforeAll(async () => {
  server = await startEmbeddedPostgres({ fast: false });
  const c = new pg.Client(server.dsn);
  await c.connect();
  await c.query('CREATE SCHEMA chaos');
  await c.end();
  dsn = dsnWithSchema(server.dsn, 'chaos');
});
afterAll(async () => {
  await server?.stop();
});

it('postgres restart: a crash and restart mid-run loses nothing', async () => {
  const workload = await seedWorkload(dsn, 4_000, 4_000);
  const logs = logDir('postgres-restart');
  const procs = spawnWorkload(dsn, logs, 2, 2, { Q_LEASE_TTL_MS: '3000', Q_LEASE_MS: '8000' });
  try {
    await Promise.all(procs.map((p) => p.waitFor(/"ready"/)));
    await sleep(1_500);
    await server.halt('immediate');
    await sleep(1_000);
    await server.start();
    const drained = await waitDrained(dsn, 120_000);
    const alive = procs.filter((p) => p.alive).length;
    for (const p of procs) p.signal('SIGTERM');
    await Promise.all(procs.map((p) => p.wait()));
    const violations = await workloadViolations(dsn, workload);
    console.log(
      `chaos postgres-restart: ${workload.requestIds.length} requests + ${workload.jobs} jobs, 1 crash-restart, ${alive}/4 processes survived, ${violations.length} invariant violations`,
    );
    expect(alive).toBe(4);
    expect(drained).toBe(true);
    expect(violations).toEqual([]);
    expect(findSecrets(logs)).toEqual([]);
  } finally {
    for (const p of procs) p.signal('SIGKILL');
  }
});
