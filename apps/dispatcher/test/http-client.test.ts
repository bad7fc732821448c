import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceClient } from '../src/http/client.js';
import { buildHeaders, joinUrl } from '../src/http/headers.js';
import { startInferenceServer, type Action, type InferenceServer } from '../src/sim/server.js';

let server: InferenceServer;
let next: Action = { status: 200, body: '{}' };
const client = new InferenceClient({ requestTimeoutMs: 5000 });
const body = Buffer.from('{"prompt":"hi"}');

beforeAll(async () => {
  server = await startInferenceServer({ behaviour: () => next });
});
afterAll(async () => {
  await client.close();
  await server.close();
});

const send = (deadlineMs = Date.now() + 10_000, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
  client.send(`${server.url}/v1/completions`, body, headers, deadlineMs);

describe('inference client (docs/design/dispatcher.md#http-classification)', () => {
  it('success: any status < 400, raw body, body byte-for-byte', async () => {
    next = { status: 200, body: '{"choices":[]}' };
    expect(await send()).toEqual({ kind: 'success', status: 200, body: '{"choices":[]}' });
    expect(server.calls.at(-1)?.body).toBe('{"prompt":"hi"}');
    next = { status: 302, body: 'moved' };
    expect((await send()).kind).toBe('success');
  });

  it('429 and 5xx are retryable with Retry-After parsed (seconds and HTTP-date)', async () => {
    next = { status: 429, body: 'slow down', headers: { 'retry-after': '3', 'x-llm-d-request-dropped-reason': 'saturated' } };
    const a = await send();
    expect(a).toMatchObject({ kind: 'retryable', category: 'RATE_LIMIT', status: 429, body: 'slow down', retryAfter: 3 });
    expect(a.kind === 'retryable' && a.message).toContain('(dropped: saturated)');
    next = { status: 503, body: 'busy', headers: { 'retry-after': new Date(Date.now() + 20_000).toUTCString() } };
    const b = await send();
    expect(b).toMatchObject({ kind: 'retryable', category: 'SERVER_ERROR', status: 503 });
    expect(b.kind === 'retryable' && b.retryAfter).toBeGreaterThan(17);
  });

  it('other 4xx are fatal with status and body; a reset is a fatal transport error', async () => {
    next = { status: 400, body: 'bad prompt' };
    expect(await send()).toMatchObject({ kind: 'fatal', category: 'INVALID_REQ', status: 400, body: 'bad prompt' });
    next = { reset: true };
    const r = await send();
    expect(r).toMatchObject({ kind: 'fatal', category: 'UNKNOWN' });
    expect(r.kind === 'fatal' && r.status).toBeUndefined();
  });

  it('the attempt ends at the request deadline (or the request timeout, whichever is first)', async () => {
    next = { status: 200, body: 'late', delayMs: 3000 };
    const t0 = Date.now();
    expect(await send(Date.now() + 300)).toMatchObject({ kind: 'fatal', category: 'UNKNOWN', timeout: 'deadline' });
    expect(Date.now() - t0).toBeLessThan(2500);
    const short = new InferenceClient({ requestTimeoutMs: 200 });
    expect(await short.send(`${server.url}/x`, body, {}, Date.now() + 60_000)).toMatchObject({ kind: 'fatal', timeout: 'request-timeout' });
    await short.close();
  });

  it('an outside abort (drain timeout) is reported as aborted', async () => {
    next = { status: 200, body: 'late', delayMs: 3000 };
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    expect(await client.send(`${server.url}/x`, body, {}, Date.now() + 10_000, ac.signal)).toEqual({ kind: 'aborted' });
  });
});

describe('headers (docs/design/dispatcher.md#headers) and URL', () => {
  it('content type, objective, message headers, then the fairness id', () => {
    const h = buildHeaders({
      objective: 'chat',
      headers: { 'X-Custom': 'v', 'x-llm-d-inference-fairness-id': 'spoofed', 'bad header': 'x' },
      metadata: { userid: 'tenant-a' },
      fairnessHeader: 'x-llm-d-inference-fairness-id',
      fairnessAttribute: 'userid',
    });
    expect(h).toEqual({
      'content-type': 'application/json',
      'x-llm-d-inference-objective': 'chat',
      'x-custom': 'v',
      'x-llm-d-inference-fairness-id': 'tenant-a',
    });
    expect(buildHeaders({ metadata: { userid: 'x'.repeat(300) }, fairnessHeader: 'f', fairnessAttribute: 'userid' })).toEqual({
      'content-type': 'application/json',
    });
    expect(buildHeaders({ metadata: { userid: 'a' }, fairnessHeader: '', fairnessAttribute: 'userid' })).toEqual({
      'content-type': 'application/json',
    });
  });
  it('joins base and path like url.JoinPath', () => {
    expect(joinUrl('http://h:1', '/v1/completions')).toBe('http://h:1/v1/completions');
    expect(joinUrl('http://h:1/gw/', 'v1/chat')).toBe('http://h:1/gw/v1/chat');
  });
});
