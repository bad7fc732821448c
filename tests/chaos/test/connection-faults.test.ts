// Scenario 3: two dispatchers and two job workers reach Postgres through a TCP proxy. Every q
// connection is terminated twice mid-run, then the proxy blackholes Postgres for 5 s. The
// processes must recover by themselves (no restart) and every invariant must hold.
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  findSecrets,
  FaultProxy,
  logDir,
  seedWorkload,
  sleep,
  spawnWorkload,
  terminateBackends,
  waitDrained,
  workloadViolations,
} from '../src/index.js';

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('chaos_conn');
});
afterAll(async () => {
  await schema.drop();
});

it('connection faults: terminated backends and a 5 s blackhole are survived without restarts', async () => {
  const workload = await seedWorkload(schema.dsn, 4_000, 4_000);
  const target = new URL(schema.dsn);
  const proxy = new FaultProxy({ host: target.hostname, port: Number(target.port || 5432) });
  const port = await proxy.listen();
  const viaProxy = new URL(schema.dsn);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(port);
  const logs = logDir('connection-faults');
  const procs = spawnWorkload(viaProxy.toString(), logs, 2, 2, { Q_LEASE_TTL_MS: '3000', Q_LEASE_MS: '8000' });
  let terminated = 0;
  try {
    await Promise.all(procs.map((p) => p.waitFor(/"ready"/)));
    for (let round = 0; round < 2; round++) {
      await sleep(1_500);
      terminated += await terminateBackends(schema.serverDsn, 'q-chaos-dispatcher');
      terminated += await terminateBackends(schema.serverDsn, 'q-chaos-worker');
    }
    await sleep(1_000);
    proxy.blackhole(5_000);
    await sleep(5_000);
    const drained = await waitDrained(schema.dsn, 120_000);
    const alive = procs.filter((p) => p.alive).length;
    for (const p of procs) p.signal('SIGTERM');
    await Promise.all(procs.map((p) => p.wait()));
    const violations = await workloadViolations(schema.dsn, workload);
    console.log(
      `chaos connection-faults: ${workload.requestIds.length} requests + ${workload.jobs} jobs, ${terminated} backends terminated in 2 rounds + 5 s blackhole, ${alive}/4 processes survived, ${violations.length} invariant violations`,
    );
    expect(terminated).toBeGreaterThan(0);
    expect(alive).toBe(4);
    expect(drained).toBe(true);
    expect(violations).toEqual([]);
    expect(findSecrets(logs)).toEqual([]);
  } finally {
    for (const p of procs) p.signal('SIGKILL');
    await proxy.close();
  }
});
