// Shared test helpers: scripted fake-server behaviour, submitting, collecting results.
import { RequestStore } from '@q/store';
import { createTestSchema, waitFor, type TestSchema } from '@q/testing';
import { afterAll, beforeAll } from 'vitest';
import { popResults, submitRequests } from '../src/client/producer.js';
import type { ResultMessage } from '../src/formats.js';
import type { Action, Call } from '../src/sim/server.js';
import { ModelServerProcess } from '../src/sim/model-server-process.js';

export { waitFor };

/** The `scenario` field of a call's JSON body. */
export function scenarioOf(call: Call): { scenario: string; id: string } {
  try {
    const b = JSON.parse(call.body) as { scenario?: string; id?: string };
    return { scenario: b.scenario ?? 'ok', id: b.id ?? '' };
  } catch {
    return { scenario: 'ok', id: '' };
  }
}

/** Collects every result of a route into a map (id → results). */
export class Results {
  readonly byId = new Map<string, ResultMessage[]>();
  count = 0;
  constructor(
    private readonly store: RequestStore,
    private readonly route: string,
  ) {}
  async drain(): Promise<void> {
    for (;;) {
      const rows = await popResults(this.store, this.route, 500);
      for (const { result } of rows) {
        this.count++;
        const l = this.byId.get(result.id) ?? [];
        l.push(result);
        this.byId.set(result.id, l);
      }
      if (rows.length < 500) return;
    }
  }
  async waitFor(ids: string[], timeoutMs = 45_000): Promise<void> {
    await waitFor(
      async () => {
        await this.drain();
        return ids.every((id) => this.byId.has(id));
      },
      timeoutMs,
      `results of ${ids.length} requests on ${this.route}`,
    );
  }
  one(id: string): ResultMessage {
    const l = this.byId.get(id);
    if (!l || l.length !== 1) throw new Error(`expected exactly one result for ${id}, got ${l?.length ?? 0}`);
    return l[0] as ResultMessage;
  }
}

/** Submits requests whose payload carries `{ id, scenario }` for the fake server. */
export async function submit(
  store: RequestStore,
  queue: string,
  route: string,
  reqs: Array<{ id: string; scenario?: string; tenant?: string; deadlineIn?: number }>,
): Promise<void> {
  const now = Math.floor(Date.now() / 1000);
  await submitRequests(
    store,
    reqs.map((r) => ({
      id: r.id,
      deadline: now + (r.deadlineIn ?? 60),
      payload: { id: r.id, scenario: r.scenario ?? 'ok', prompt: 'hi' },
      ...(r.tenant ? { metadata: { userid: r.tenant } } : {}),
    })),
    { queue, route },
  );
}

/** A 200 with a body naming the request. */
export const ok = (id: string, delayMs = 0): Action => ({ status: 200, body: JSON.stringify({ ok: id }), delayMs });

/** A minimal queue of a config document (its inference server is never called). */
export const configQueue = { queue_name: 'q1', igw_base_url: 'http://127.0.0.1:9/' };

/** The error `fn` throws (a config error is expected); fails if it throws none. */
export function configError(fn: () => unknown): { code?: string; message: string } {
  try {
    fn();
  } catch (err) {
    return err as { code?: string; message: string };
  }
  throw new Error('expected a config error');
}

/** What {@link useSimulatedServer} opens for a test file. */
export interface SimulatedServerSetup {
  schema: TestSchema;
  server: ModelServerProcess;
  store: RequestStore;
}

/**
 * Registers the file's lifecycle for the saturation tests: a fresh schema, the simulated model
 * server in its own process (`capacity` slots, 140–160 ms calls slowing by 0.2 under load) and a
 * `RequestStore` of 3 connections on the schema, handed to `onOpen` in `beforeAll`; all closed in
 * `afterAll`.
 */
export function useSimulatedServer(prefix: string, capacity: number, onOpen: (t: SimulatedServerSetup) => void): void {
  let schema: TestSchema | undefined;
  let server: ModelServerProcess | undefined;
  let store: RequestStore | undefined;
  beforeAll(async () => {
    schema = await createTestSchema(prefix);
    server = await ModelServerProcess.start({ capacity, latencyMs: [140, 160], slowdown: 0.2, priority: -10 });
    store = await RequestStore.open(schema.dsn, { maxConns: 3 });
    onOpen({ schema, server, store });
  });
  afterAll(async () => {
    await store?.close();
    await server?.close();
    await schema?.drop();
  });
}
