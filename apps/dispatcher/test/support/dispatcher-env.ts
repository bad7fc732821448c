// The set-up of a dispatcher test file: a fresh schema, a fake inference server on loopback, a
// producer store, and the dispatchers the file starts (stopped before the rest is torn down).
import { afterAll, beforeAll } from 'vitest';
import { createTestSchema, type TestSchema } from '@q/testing';
import { RequestStore } from '@q/store';
import { loadConfig } from '../../src/config/load.js';
import { Dispatcher, type DispatcherOptions } from '../../src/service/dispatcher.js';
import {
  startInferenceServer,
  type Action,
  type Behaviour,
  type Call,
  type InferenceServerOptions,
  type InferenceServer,
} from '../../src/sim/server.js';
import { ok, scenarioOf } from '../helpers.js';

/** The top-level fields every test dispatcher shares unless its document overrides them: short leases, no ports. */
const TEST_DEFAULTS = {
  lease_ttl_seconds: 5,
  poll_interval_ms: 100,
  batch_size: 16,
  concurrency: 16,
  max_connections: 6,
  health_port: -1,
  metrics_port: -1,
} as const;

/** A config document for a test dispatcher on `dsn`: {@link TEST_DEFAULTS} under `document`. */
export function testDocument(dsn: string, document: Record<string, unknown>): Record<string, unknown> {
  return { url: dsn, ...TEST_DEFAULTS, ...document };
}

/** Starts a dispatcher on {@link testDocument}`(dsn, document)`. */
export async function startTestDispatcher(
  dsn: string,
  document: Record<string, unknown>,
  opts: Omit<DispatcherOptions, 'config'> = {},
): Promise<Dispatcher> {
  return Dispatcher.start({ ...opts, config: loadConfig({ env: {}, document: testDocument(dsn, document) }) });
}

/** What a file gets from {@link useDispatcherEnv} (set once its `beforeAll` ran). */
export interface DispatcherEnv {
  readonly schema: TestSchema;
  readonly server: InferenceServer;
  readonly store: RequestStore;
  /** Starts a dispatcher on {@link testDocument}`(schema.dsn, document)`; `afterAll` stops it. */
  start(document: Record<string, unknown>, opts?: Omit<DispatcherOptions, 'config'>): Promise<Dispatcher>;
  /** The server's calls for request `id`. */
  callsOf(id: string): Call[];
}

/** Registers the file's `beforeAll`/`afterAll`: schema `<prefix>_…`, the fake server with `server`, a store of 3 connections. */
export function useDispatcherEnv(prefix: string, server: InferenceServerOptions): DispatcherEnv {
  const started: Dispatcher[] = [];
  const env = {
    async start(document: Record<string, unknown>, opts: Omit<DispatcherOptions, 'config'> = {}) {
      const d = await startTestDispatcher(env.schema.dsn, document, opts);
      started.push(d);
      return d;
    },
    callsOf: (id: string) => env.server.calls.filter((c) => scenarioOf(c).id === id),
  } as { -readonly [K in keyof DispatcherEnv]: DispatcherEnv[K] };
  beforeAll(async () => {
    env.schema = await createTestSchema(prefix);
    env.server = await startInferenceServer(server);
    env.store = await RequestStore.open(env.schema.dsn, { maxConns: 3 });
  });
  afterAll(async () => {
    for (const d of started) await d.stop();
    await env.store?.close();
    await env.server?.close();
    await env.schema?.drop();
  });
  return env;
}

/** A behaviour answering every call 200 with its request id, after `delayMs(scenario)` ms. */
export function answerOk(delayMs: (scenario: string) => number = () => 0): Behaviour {
  return (call) => ok(scenarioOf(call).id, delayMs(scenarioOf(call).scenario));
}

/**
 * A behaviour scripted per request: `act(scenario, id, n)`, `n` the request's attempt number from
 * 1. Scenario `ok` answers 200 unless `act` scripts it; a scenario `act` does not know (it returns
 * `undefined`) is answered 500, so a typo fails the test instead of passing as a success.
 */
export function scripted(act: (scenario: string, id: string, n: number) => Action | undefined): Behaviour {
  const attempts = new Map<string, number>();
  return (call) => {
    const { scenario, id } = scenarioOf(call);
    const n = (attempts.get(id) ?? 0) + 1;
    attempts.set(id, n);
    return act(scenario, id, n) ?? (scenario === 'ok' ? ok(id) : { status: 500, body: 'unknown scenario' });
  };
}

/** The Prometheus text a dispatcher serves on its metrics port. */
export async function metricsText(d: Pick<Dispatcher, 'metricsPort'>): Promise<string> {
  return (await fetch(`http://127.0.0.1:${d.metricsPort}/metrics`)).text();
}
