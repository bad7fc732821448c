// Issue 35 items 1, 2 and 6 (every request gets its answer), end to end on a real Postgres with a
// fake inference server: foreign envelopes whose `internal` fields are not what they claim, tenant
// ids the quota store refuses, and response bodies whose result would not fit its row.
import { createQuota, type Quota } from '@q/quota';
import { isQError } from '@q/schema';
import { MAX_VALUE_BYTES } from '@q/store';
import { beforeAll, describe, expect, it } from 'vitest';
import { submitRequests } from '../src/client/producer.js';
import { loadConfig } from '../src/config/load.js';
import { MAX_RESPONSE_BYTES_LIMIT } from '../src/config/schema.js';
import { newRequestToken, splitPayload, type PublicRequest } from '../src/formats.js';
import { InferenceClient } from '../src/http/client.js';
import { silentLogger } from '../src/logger.js';
import { DispatcherMetrics } from '../src/metrics.js';
import { CancelBatcher } from '../src/pipeline/cancel-batcher.js';
import { createFailureAnswer, createHandler, type HandlerDeps } from '../src/pipeline/handler.js';
import type { QueuedRequest } from '../src/pipeline/ports.js';
import type { Action } from '../src/sim/server.js';
import { configError, configQueue, Results } from './helpers.js';
import { scripted, useDispatcherEnv } from './support/dispatcher-env.js';

/** Bytes of the worst-escaping body (control bytes: 6 bytes each in JSON). */
const HUGE_BODY_BYTES = 43_000_000;

function act(scenario: string): Action | undefined {
  if (scenario === 'control-bytes') return { status: 200, body: '\u0001'.repeat(HUGE_BODY_BYTES) };
  return undefined;
}

const env = useDispatcherEnv('disp35', { behaviour: scripted(act) });
const { callsOf } = env;
let out: Results;
const gates = [{ kind: 'concurrency', limit: 4 }];

beforeAll(async () => {
  out = new Results(env.store, 'a35-out');
  await env.start({ retry_base_ms: 300, queues: [{ queue_name: 'a35', igw_base_url: env.server.url, gates }] });
});

const inAMinute = () => Math.floor(Date.now() / 1000) + 60;

/** Enqueues a row as another producer could (no producer-side validation). */
async function enqueueRaw(id: string, internal: Record<string, unknown>, data: Partial<PublicRequest> = {}): Promise<void> {
  const token = newRequestToken();
  const deadline = inAMinute();
  const { envelope, payload } = splitPayload(
    { id, deadline, payload: { id, scenario: 'ok' }, ...data },
    { request_token: token, result_queue_name: 'a35-out', ...internal },
  );
  await env.store.enqueue([{ id, token, queue: 'a35', deadline, envelope, payload }]);
}

describe('item 1: a foreign envelope whose internal fields are not numbers', () => {
  it('result_ttl_seconds "3600" or 1e300, retry_count "3" → INVALID_REQUEST once, without an endpoint call', async () => {
    await enqueueRaw('ttl-text', { result_ttl_seconds: '3600' });
    await enqueueRaw('ttl-huge', { result_ttl_seconds: 1e300 });
    await enqueueRaw('retry-text', { retry_count: '3' });
    await out.waitFor(['ttl-text', 'ttl-huge', 'retry-text'], 20_000);
    await new Promise((r) => setTimeout(r, 1500)); // a second answer, if one were coming
    await out.drain();
    const ttl = 'queued request: internal.result_ttl_seconds must be an integer from 0 to 2147483647';
    expect(out.one('ttl-text')).toMatchObject({ error_code: 'INVALID_REQUEST', error_message: ttl });
    expect(out.one('ttl-huge')).toMatchObject({ error_code: 'INVALID_REQUEST', error_message: ttl });
    expect(out.one('retry-text')).toMatchObject({
      error_code: 'INVALID_REQUEST',
      error_message: 'queued request: internal.retry_count must be an integer >= 0',
    });
    for (const id of ['ttl-text', 'ttl-huge', 'retry-text']) expect(callsOf(id), id).toHaveLength(0);
    const { rows } = await env.schema.pool().query(`SELECT id FROM q_requests WHERE queue = 'a35'`);
    expect(rows).toEqual([]);
  });
});

describe('item 2: a tenant id the quota store refuses', () => {
  it('is refused at submit (NUL, a key over 2,048 bytes): INVALID_ARGUMENT naming the attribute, nothing written', async () => {
    for (const [userid, why] of [
      ['ten\u0000ant', 'must not contain NUL'],
      ['t'.repeat(2100), 'must be at most 2048 bytes (got 2113)'],
    ] as const) {
      const err = await submitRequests(env.store, [{ id: 'tenant-bad', deadline: inAMinute(), metadata: { userid } }], {
        queue: 'a35',
        route: 'a35-out',
      }).catch((e: unknown) => e);
      expect(isQError(err, 'INVALID_ARGUMENT'), String(err)).toBe(true);
      expect((err as Error).message).toBe(`request "tenant-bad": metadata.userid cannot be a quota key: the key "quota:userid:…" ${why}`);
    }
    // The queue's own gates decide: another attribute is checked, userid then is not.
    const custom = [{ prefix: 'q:', attribute: 'team' }];
    await expect(
      submitRequests(env.store, [{ id: 'team-bad', deadline: inAMinute(), metadata: { team: 'a\u0000' } }], {
        queue: 'none',
        route: 'x',
        gates: custom,
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const { rows } = await env.schema.pool().query(`SELECT id FROM q_requests WHERE id IN ('tenant-bad', 'team-bad')`);
    expect(rows).toEqual([]);
  });

  it('queued by another producer, it is answered INVALID_REQUEST at dispatch at once, not retried until DEADLINE_EXCEEDED', async () => {
    const started = Date.now();
    await enqueueRaw('nul-tenant', {}, { metadata: { userid: 'ten\u0000ant' } });
    await enqueueRaw('long-tenant', {}, { metadata: { userid: 'é'.repeat(1100) } });
    await out.waitFor(['nul-tenant', 'long-tenant'], 20_000);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(out.one('nul-tenant')).toMatchObject({
      error_code: 'INVALID_REQUEST',
      error_message: 'queued request: metadata.userid cannot be a quota key: the key "quota:userid:…" must not contain NUL',
    });
    expect(out.one('long-tenant')).toMatchObject({ error_code: 'INVALID_REQUEST' });
    expect(out.one('long-tenant').error_message).toContain('must be at most 2048 bytes (got 2213)');
    expect(callsOf('nul-tenant')).toHaveLength(0);
    expect(callsOf('long-tenant')).toHaveLength(0);
  });
});

/** A handler of queue `h35` on the test database, with `quota` (and then its gates) and a client reading up to `maxResponseBytes`. */
function handlerOf(
  quota: HandlerDeps['quota'],
  maxResponseBytes = 16 * 1024 * 1024,
): { handle: ReturnType<typeof createHandler>; client: InferenceClient } {
  const queueGates = quota ? gates : [];
  const cfg = loadConfig({ env: {}, document: { queues: [{ queue_name: 'h35', igw_base_url: env.server.url, gates: queueGates }] } });
  const queue = cfg.queues[0]!;
  const client = new InferenceClient({ connections: 4, requestTimeoutMs: 60_000, maxResponseBytes });
  const handle = createHandler({
    queue,
    config: cfg,
    client,
    cancels: new CancelBatcher(env.store),
    ...(quota ? { quota } : {}),
    metrics: new DispatcherMetrics(undefined, 'h35'),
    logger: silentLogger,
  });
  return { handle, client };
}

/** A dispatched request of queue `h35` (the handler never touches its row). */
function dispatched(id: string, data: Partial<PublicRequest> = {}, scenario = 'ok'): QueuedRequest {
  const token = newRequestToken();
  const deadline = inAMinute();
  const { envelope, payload } = splitPayload({ id, deadline, payload: { id, scenario }, ...data }, { request_token: token });
  return { id, token, queue: 'h35', deadline, envelope, payload, partition: 0, epoch: 1, attempt: 1, cancelled: false };
}

describe('item 1: the answer to a request whose handling kept failing (the runner stopped running it)', () => {
  it('is INFERENCE_ERROR naming why, on the request route (result-sql when that is invalid), without an endpoint call', () => {
    const cfg = loadConfig({ env: {}, document: { queues: [{ queue_name: 'h35', igw_base_url: env.server.url, result_ttl_seconds: 30 }] } });
    const deps: HandlerDeps = {
      queue: cfg.queues[0]!,
      config: cfg,
      client: new InferenceClient(),
      cancels: new CancelBatcher(env.store),
      metrics: new DispatcherMetrics(undefined, 'h35'),
      logger: silentLogger,
    };
    const answer = createFailureAnswer(deps);
    const req = dispatched('kept-failing');
    req.envelope = JSON.stringify({ ...JSON.parse(req.envelope), internal: { request_token: req.token, result_queue_name: 'mine' } });
    const a = answer(req, { failures: 5, reason: 'no valid outcome: result.expiresAt must be a non-negative number of Unix seconds' });
    expect(a.route).toBe('mine');
    expect(a.expiresAt).toBeGreaterThan(Date.now() / 1000);
    expect(JSON.parse(a.payload)).toMatchObject({
      id: 'kept-failing',
      request_token: req.token,
      error_code: 'INFERENCE_ERROR',
      error_message:
        'request could not be answered after 5 failed handling(s): no valid outcome: result.expiresAt must be a non-negative number of Unix seconds',
    });
    req.envelope = 'not json';
    expect(answer(req, { failures: 1, reason: 'handler threw' }).route).toBe('result-sql');
    expect(callsOf('kept-failing')).toHaveLength(0);
  });
});

describe('item 2: a quota INVALID_ARGUMENT at dispatch', () => {
  let quota: Quota;
  beforeAll(async () => {
    quota = await createQuota({ pool: env.store.pool, ttlMs: 5_000 });
    return () => quota.close();
  });

  it('is INVALID_REQUEST, not "try again" (a back-to-pending that loops until the deadline)', async () => {
    // A key the checks at dispatch pass but the quota store refuses (here: one it is handed with a NUL).
    const refusing: HandlerDeps['quota'] = {
      acquire: (key, limit, signal) => quota.acquire(`${key}\u0000`, limit, signal),
      admit: (key, limit, windowMs, signal) => quota.admit(`${key}\u0000`, limit, windowMs, signal),
    };
    const { handle, client } = handlerOf(refusing);
    try {
      const outcome = await handle(dispatched('quota-refused', { metadata: { userid: 'tenant-a' } }));
      expect(outcome).toHaveProperty('result');
      const result = JSON.parse((outcome as { result: { payload: string } }).result.payload) as Record<string, unknown>;
      expect(result).toMatchObject({ id: 'quota-refused', error_code: 'INVALID_REQUEST' });
      expect(result.error_message).toMatch(/^quota gate: quota: key contains a NUL/);
      expect(callsOf('quota-refused')).toHaveLength(0);
    } finally {
      await client.close();
    }
  });
});

describe('item 6: response bodies and what a result row holds', () => {
  it('max_response_bytes is bounded so that 6× JSON escaping still fits a row; beyond is refused (CONFIG)', () => {
    // The worst result: every body byte escaped to 6, plus an id and a token of 2,048 bytes escaped as well.
    expect(6 * MAX_RESPONSE_BYTES_LIMIT + 6 * 2 * 2048 + 200).toBeLessThanOrEqual(MAX_VALUE_BYTES);
    const doc = (n: number) => ({ max_response_bytes: n, queues: [configQueue] });
    expect(loadConfig({ env: {}, document: doc(MAX_RESPONSE_BYTES_LIMIT) }).max_response_bytes).toBe(MAX_RESPONSE_BYTES_LIMIT);
    for (const n of [MAX_RESPONSE_BYTES_LIMIT + 1, 512 * 1024 * 1024]) {
      const err = configError(() => loadConfig({ env: {}, document: doc(n) }));
      expect(err).toMatchObject({ code: 'CONFIG', message: `config: max_response_bytes must be <= ${MAX_RESPONSE_BYTES_LIMIT}` });
    }
  });

  it('a body whose result would not fit its row → INFERENCE_ERROR naming the sizes after one call', async () => {
    // A client reading more than the config allows, as a dispatcher of the old 512 MiB bound did.
    const { handle, client } = handlerOf(undefined, 64 * 1024 * 1024);
    try {
      const outcome = await handle(dispatched('escaped-huge', {}, 'control-bytes'));
      const written = (outcome as { result: { payload: string } }).result.payload;
      expect(written.length).toBeLessThan(1000);
      const result = JSON.parse(written) as Record<string, unknown>;
      expect(result).toMatchObject({ id: 'escaped-huge', error_code: 'INFERENCE_ERROR' });
      expect(result.error_message).toMatch(
        new RegExp(
          `^response body of ${HUGE_BODY_BYTES} bytes is \\d+ bytes as a result \\(JSON-escaped\\); a result holds at most ${MAX_VALUE_BYTES} bytes$`,
        ),
      );
      expect(callsOf('escaped-huge')).toHaveLength(1);
    } finally {
      await client.close();
    }
  }, 60_000);
});

describe('item 4: pooler and schema settings', () => {
  it('are read from the file, flags and environment, and checked (CONFIG naming the field)', () => {
    const cfg = loadConfig({ env: {}, document: { pooler: 'transaction', schema: 'q_app', queues: [configQueue] } });
    expect(cfg).toMatchObject({ pooler: 'transaction', schema: 'q_app' });
    expect(loadConfig({ env: { Q_POOLER: 'transaction', Q_SCHEMA: 'from_env' }, document: { queues: [configQueue] } })).toMatchObject({
      pooler: 'transaction',
      schema: 'from_env',
    });
    expect(loadConfig({ env: {}, document: { queues: [configQueue] }, overrides: { schema: 'from_flag', pooler: 'transaction' } })).toMatchObject(
      {
        schema: 'from_flag',
      },
    );
    expect(configError(() => loadConfig({ env: {}, document: { pooler: 'session', queues: [configQueue] } }))).toMatchObject({
      code: 'CONFIG',
      message: 'config: pooler must be one of "transaction"',
    });
    expect(configError(() => loadConfig({ env: {}, document: { schema: 'a\u0000b', queues: [configQueue] } }))).toMatchObject({
      code: 'CONFIG',
      message: 'config: schema contains a NUL character',
    });
    expect(configError(() => loadConfig({ env: {}, document: { schema: 's'.repeat(64), queues: [configQueue] } })).message).toMatch(
      /^config: schema is longer than 63 bytes/,
    );
  });
});
