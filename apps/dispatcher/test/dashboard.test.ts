// `dashboard` in the configuration: `run` serves the read-only web dashboard on its own port,
// opening on the request queues, where this dispatcher holds the queue's partitions.
import { createTestSchema, waitFor, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { Dispatcher } from '../src/service/dispatcher.js';
import { startInferenceServer, type InferenceServer } from '../src/sim/server.js';

let schema: TestSchema;
let server: InferenceServer;
let d: Dispatcher;

beforeAll(async () => {
  schema = await createTestSchema('dispdash');
  server = await startInferenceServer({});
  const config = loadConfig({
    env: {},
    document: {
      url: schema.dsn,
      health_port: -1,
      metrics_port: -1,
      poll_interval_ms: 50,
      lease_ttl_seconds: 5,
      queues: [{ queue_name: 'dash-q', igw_base_url: server.url }],
      dashboard: { port: 0 },
    },
  });
  d = await Dispatcher.start({ config });
});
afterAll(async () => {
  await d?.stop();
  await server?.close();
  await schema?.drop();
});

describe('dispatcher dashboard', () => {
  it('serves the request queues page with this dispatcher holding the partitions', async () => {
    expect(d.dashboardPort).toBeGreaterThan(0);
    const base = `http://127.0.0.1:${d.dashboardPort}`;
    expect((await fetch(`${base}/`, { redirect: 'manual' })).headers.get('location')).toBe('/requests');
    const page = await waitFor(async () => {
      const text = await (await fetch(`${base}/requests`)).text();
      return (text.match(new RegExp(`data-owner="${d.owner}"`, 'g'))?.length ?? 0) >= 64 ? text : undefined;
    });
    expect(page).toContain('data-queue="dash-q"');
    // Read-only: no action is accepted.
    const r = await fetch(`${base}/actions/cancel`, {
      method: 'POST',
      headers: { 'x-q-dashboard': '1', 'content-type': 'application/json' },
      body: '{}',
    });
    expect(r.status).toBe(403);
  });

  it('is refused with a bad section', () => {
    expect(() =>
      loadConfig({ env: {}, document: { url: schema.dsn, queues: [{ queue_name: 'x', igw_base_url: server.url }], dashboard: { port: -3 } } }),
    ).toThrow();
  });
});
