// The worker's telemetry carries the service name it was configured with (`service.name`).
import net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import { startWorkerApp, type WorkerApp } from '../src/app.js';
import { testConfig } from './helpers.js';

let schema: TestSchema;
let app: WorkerApp | undefined;
beforeAll(async () => {
  schema = await createTestSchema('akw_otel');
});
afterAll(async () => {
  await app?.stop();
  await schema?.drop();
});

/** A port that was free a moment ago (the flag takes 1..65535, not 0). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

it('--service-name becomes service.name of the exported metrics (target_info)', async () => {
  const port = await freePort();
  app = await startWorkerApp(
    testConfig(schema.dsn, ['--queues', 'notify', '--prometheus-port', String(port), '--service-name', 'billing-worker']),
  );
  const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  expect(body).toMatch(/target_info\{[^}]*service_name="billing-worker"/);
  expect(body).toMatch(/target_info\{[^}]*service_version="\d+\.\d+\.\d+"/);
  expect(body).not.toContain('unknown_service');
});
