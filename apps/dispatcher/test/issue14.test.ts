// Regression tests of issue #14 items 19, 21, 22 and 24 (dispatcher side), end to end: real
// Postgres (own schema), a fake inference server on loopback, one in-process dispatcher.
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestSchema } from '@q/testing';
import type { RequestStore } from '@q/store';
import { submitRequests } from '../src/client/producer.js';
import { loadConfig } from '../src/config/load.js';
import { newRequestToken, splitPayload } from '../src/formats.js';
import type { Dispatcher } from '../src/service/dispatcher.js';
import type { Action } from '../src/sim/server.js';
import { ok, Results, submit } from './helpers.js';
import { scripted, useDispatcherEnv } from './support/dispatcher-env.js';

let schema: TestSchema;
let store: RequestStore;
let dispatcher: Dispatcher;
let out: Results;
let fallback: Results;
/** Deadline (Unix s) of the `persist-429` request, read by its script. */
let persistDeadline = 0;
const MAX_BODY = 4096;

function act(scenario: string, id: string, n: number): Action | undefined {
  switch (scenario) {
    case 'stall-body':
      // The head and half the body arrive; the rest never does.
      return { status: 200, body: JSON.stringify({ ok: id, pad: 'x'.repeat(200) }), partial: { bytes: 50, then: 'stall' } };
    case 'reset-body-once':
      return n === 1 ? { status: 200, body: JSON.stringify({ ok: id, pad: 'x'.repeat(200) }), partial: { bytes: 50, then: 'reset' } } : ok(id);
    case 'huge-body':
      return { status: 200, body: 'y'.repeat(MAX_BODY * 4) };
    case 'persist-429':
      // Answered within the last second before the deadline, so the retry is due only after it.
      return { status: 429, body: `{"error":"busy ${id} #${n}"}`, delayMs: Math.max(0, (persistDeadline - 1) * 1000 + 300 - Date.now()) };
    default:
      return undefined;
  }
}

const env = useDispatcherEnv('disp14', { behaviour: scripted(act) });
const { callsOf } = env;

beforeAll(async () => {
  ({ schema, store } = env);
  out = new Results(store, 'i14-out');
  fallback = new Results(store, 'result-sql');
  dispatcher = await env.start({
    // Item 22: fractional seconds used to pass validation and then kill the partition worker.
    lease_ttl_seconds: 4.07,
    handoff_timeout_seconds: 0.5,
    retry_base_ms: 300,
    max_response_bytes: MAX_BODY,
    queues: [{ queue_name: 'i14', igw_base_url: env.server.url }],
  });
});

/** Enqueues a raw row as another producer could (no producer-side validation). */
async function enqueueRaw(id: string, deadline: number, internal: Record<string, unknown>): Promise<void> {
  const token = newRequestToken();
  const { envelope, payload } = splitPayload({ id, deadline, payload: { id, scenario: 'ok' } }, { request_token: token, ...internal });
  await store.enqueue([{ id, token, queue: 'i14', deadline, envelope, payload }]);
}

describe('item 22: fractional-second config values', () => {
  it('lease_ttl_seconds 4.07 and handoff_timeout_seconds 0.5 start a working dispatcher', async () => {
    expect(dispatcher.isReady()).toBe(true);
    await submit(store, 'i14', 'i14-out', [{ id: 'frac-1' }]);
    await out.waitFor(['frac-1'], 20_000);
    expect(out.one('frac-1')).toMatchObject({ status_code: 200, payload: '{"ok":"frac-1"}' });
  });

  it('values beyond what a timer can hold are refused up front with the field named', () => {
    const doc = { queues: [{ queue_name: 'a', igw_base_url: 'http://127.0.0.1:9/' }] };
    expect(() => loadConfig({ env: {}, document: { ...doc, poll_interval_ms: 2 ** 31 } })).toThrow(
      /config: poll_interval_ms must be <= 2147483647/,
    );
    expect(() => loadConfig({ env: {}, document: { ...doc, lease_ttl_seconds: 0.0001 } })).toThrow(
      /config: lease_ttl_seconds must be at least 0.001/,
    );
    expect(() => loadConfig({ env: {}, document: { ...doc, handoff_timeout_seconds: 3e6 } })).toThrow(
      /config: handoff_timeout_seconds must be <= 2147483/,
    );
  });
});

describe('item 19: result routes are validated at submit', () => {
  it('a 3,000-character route is refused with INVALID_ARGUMENT and nothing is written', async () => {
    const deadline = Math.floor(Date.now() / 1000) + 60;
    const reqs = [{ id: 'long-route', deadline, payload: {} }];
    for (const route of ['r'.repeat(3000), 'a\0b', 'x\ud800y', '']) {
      const err = await submitRequests(store, reqs, { queue: 'i14', route }).then(
        () => undefined,
        (e: unknown) => e as { code?: string; message: string },
      );
      expect(err?.code).toBe('INVALID_ARGUMENT');
      expect(err?.message).toMatch(/^route /);
    }
    // 2,048 bytes exactly is fine (multi-byte characters count as their UTF-8 bytes).
    await expect(
      submitRequests(store, [{ id: 'max-route', deadline, payload: {} }], { queue: 'none', route: 'é'.repeat(1024) }),
    ).resolves.toHaveLength(1);
    const { rows } = await schema.pool().query<{ id: string }>(`SELECT id FROM q_requests WHERE id IN ('long-route', 'max-route')`);
    expect(rows.map((r) => r.id)).toEqual(['max-route']);
  });

  it('a queued request with a route the store refuses gets INVALID_REQUEST on the default route, without a call', async () => {
    await enqueueRaw('bad-route', Math.floor(Date.now() / 1000) + 60, { result_queue_name: 'z'.repeat(3000) });
    await fallback.waitFor(['bad-route'], 20_000);
    expect(fallback.one('bad-route')).toMatchObject({
      error_code: 'INVALID_REQUEST',
      error_message: 'result route must be at most 2048 bytes (got 3000)',
    });
    expect(callsOf('bad-route')).toHaveLength(0);
  });
});

describe('item 21: a response body that does not finish is never a success', () => {
  it('a 200 whose body stalls past the deadline → INFERENCE_ERROR, not a 200 with an empty payload', async () => {
    await submit(store, 'i14', 'i14-out', [{ id: 'stall-1', scenario: 'stall-body', deadlineIn: 2 }]);
    await out.waitFor(['stall-1'], 20_000);
    const r = out.one('stall-1');
    expect(r.status_code).toBeUndefined();
    expect(r).toMatchObject({ error_code: 'INFERENCE_ERROR' });
    expect(r.error_message).toContain('reading body');
  });

  it('a body cut off by a reset is retried, and the retry is the result', async () => {
    await submit(store, 'i14', 'i14-out', [{ id: 'cut-1', scenario: 'reset-body-once', deadlineIn: 20 }]);
    await out.waitFor(['cut-1'], 20_000);
    expect(out.one('cut-1')).toMatchObject({ status_code: 200, payload: '{"ok":"cut-1"}' });
    expect(callsOf('cut-1')).toHaveLength(2);
  });

  it('a body over max_response_bytes → INFERENCE_ERROR naming the limit, no retry', async () => {
    await submit(store, 'i14', 'i14-out', [{ id: 'huge-1', scenario: 'huge-body', deadlineIn: 20 }]);
    await out.waitFor(['huge-1'], 20_000);
    const r = out.one('huge-1');
    expect(r).toMatchObject({ error_code: 'INFERENCE_ERROR' });
    expect(r.error_message).toContain(`larger than ${MAX_BODY} bytes (max_response_bytes)`);
    expect(callsOf('huge-1')).toHaveLength(1);
  });
});

describe('item 24: deadlines', () => {
  it('a queued request with deadline 0 → INVALID_REQUEST, not DEADLINE_EXCEEDED', async () => {
    await enqueueRaw('zero-deadline', 0, { result_queue_name: 'i14-out' });
    await out.waitFor(['zero-deadline'], 20_000);
    expect(out.one('zero-deadline')).toMatchObject({
      error_code: 'INVALID_REQUEST',
      error_message: 'Failed: deadline is missing or invalid (Unix seconds).',
    });
    expect(callsOf('zero-deadline')).toHaveLength(0);
  });

  it('429 until the deadline → the last 429 response (status and body) is the result', async () => {
    persistDeadline = Math.floor(Date.now() / 1000) + 3;
    await submitRequests(store, [{ id: 'p429', deadline: persistDeadline, payload: { id: 'p429', scenario: 'persist-429' } }], {
      queue: 'i14',
      route: 'i14-out',
    });
    await out.waitFor(['p429'], 20_000);
    const n = callsOf('p429').length;
    expect(n).toBeGreaterThanOrEqual(1);
    const r = out.one('p429');
    expect(r).toMatchObject({ status_code: 429, payload: `{"error":"busy p429 #${n}"}` });
    expect(r.error_code).toBeUndefined();
  });
});
