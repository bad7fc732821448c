// The Batch API (issue 43) driven by the official `openai` client (pinned 6.49.0, the newest that
// runs on Node 20): upload a JSONL file, create a batch, poll until it completes, download the
// output; every custom_id exactly once. Plus validation failures, tenant isolation and bad auth.
import OpenAI, { toFile } from 'openai';
import { createTestSchema, waitFor, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../src/batch/api-keys.js';
import { loadConfig } from '../src/config/load.js';
import { Dispatcher } from '../src/service/dispatcher.js';
import { startInferenceServer, type InferenceServer } from '../src/sim/server.js';

let schema: TestSchema;
let server: InferenceServer;
let d: Dispatcher;
let base: string;

const KEYS = { acme: 'sk-acme-0123456789', other: 'sk-other-0123456789' };

beforeAll(async () => {
  schema = await createTestSchema('batchapi');
  // Answers each chat completion with the text of its first message, and some usage.
  server = await startInferenceServer({
    behaviour: (call) => {
      const body = JSON.parse(call.body) as { messages?: { content?: string }[] };
      const text = body.messages?.[0]?.content ?? '';
      return {
        delayMs: text.startsWith('slow') ? 1500 : 0,
        status: 200,
        body: JSON.stringify({
          id: 'chatcmpl-x',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: `echo ${text}` }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
        }),
        headers: { 'content-type': 'application/json' },
      };
    },
  });
  const config = loadConfig({
    env: {},
    document: {
      url: schema.dsn,
      health_port: -1,
      metrics_port: 0,
      poll_interval_ms: 50,
      lease_ttl_seconds: 5,
      queues: [{ queue_name: 'batch-q', igw_base_url: server.url, gates: [{ kind: 'concurrency', limit: 4 }] }],
      batch_api: {
        port: 0,
        api_keys: [
          { sha256: hashApiKey(KEYS.acme), tenant: 'acme' },
          { sha256: hashApiKey(KEYS.other), tenant: 'other' },
        ],
        driver_interval_ms: 50,
        max_file_lines: 100,
        max_file_bytes: 64 * 1024,
      },
    },
  });
  d = await Dispatcher.start({ config });
  base = `http://127.0.0.1:${d.batchApiPort}/v1`;
}, 60_000);

afterAll(async () => {
  await d?.stop();
  await server?.close();
  await schema?.drop();
});

const client = (key: string): OpenAI => new OpenAI({ apiKey: key, baseURL: base, maxRetries: 0 });

function chatLine(customId: string, over: Record<string, unknown> = {}): string {
  return JSON.stringify({
    custom_id: customId,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: 'm', messages: [{ role: 'user', content: customId }] },
    ...over,
  });
}

async function upload(c: OpenAI, lines: string[]): Promise<OpenAI.FileObject> {
  return c.files.create({ file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'input.jsonl'), purpose: 'batch' });
}

async function settled(c: OpenAI, id: string): Promise<OpenAI.Batch> {
  return waitFor(
    async () => {
      const b = await c.batches.retrieve(id);
      return ['completed', 'failed', 'expired', 'cancelled'].includes(b.status) ? b : undefined;
    },
    45_000,
    `batch ${id} to finish`,
  );
}

describe('Batch API with the official openai client', () => {
  it('upload, create, poll until completed, download: every custom_id exactly once with its answer', async () => {
    const c = client(KEYS.acme);
    const ids = Array.from({ length: 40 }, (_, i) => `req-${i}`);
    const file = await upload(
      c,
      ids.map((id) => chatLine(id)),
    );
    expect(file).toMatchObject({ object: 'file', purpose: 'batch', filename: 'input.jsonl' });
    expect(file.id).toMatch(/^file-/);
    expect((await c.files.retrieve(file.id)).bytes).toBe(file.bytes);
    const created = await c.batches.create({
      input_file_id: file.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
      metadata: { job: 'nightly' },
    });
    expect(created.status).toBe('validating');
    expect(created.metadata).toEqual({ job: 'nightly' });
    const done = await settled(c, created.id);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: 40, completed: 40, failed: 0 });
    expect(done.error_file_id).toBeNull();
    for (const f of ['in_progress_at', 'finalizing_at', 'completed_at'] as const) expect(done[f]).toBeGreaterThanOrEqual(done.created_at);
    const text = await (await c.files.content(done.output_file_id!)).text();
    const lines = text
      .trim()
      .split('\n')
      .map(
        (l) =>
          JSON.parse(l) as {
            id: string;
            custom_id: string;
            response: { status_code: number; request_id: string; body: { choices: { message: { content: string } }[] } };
            error: null;
          },
      );
    expect(lines.map((l) => l.custom_id).sort()).toEqual([...ids].sort());
    for (const l of lines) {
      expect(l.error).toBeNull();
      expect(l.id).toMatch(/^batch_req_/);
      expect(l.response.status_code).toBe(200);
      expect(l.response.body.choices[0]!.message.content).toBe(`echo ${l.custom_id}`);
    }
    // The batch's requests carried the tenant as their quota key.
    expect(server.calls.filter((call) => call.tenant === 'acme').length).toBeGreaterThanOrEqual(40);
    // Per-tenant accounting: the batch object and the metrics count the answers' usage.
    expect((done as unknown as { usage: unknown }).usage).toEqual({ input_tokens: 120, output_tokens: 80, total_tokens: 200 });
    const scraped = await (await fetch(`http://127.0.0.1:${d.metricsPort}/metrics`)).text();
    const series = (name: string, labels: string[]): number =>
      Number(
        scraped
          .split('\n')
          .find((l) => l.startsWith(name) && labels.every((x) => l.includes(x)))
          ?.split(' ')
          .at(-1) ?? NaN,
      );
    expect(series('q_dispatcher_batch_tokens', ['tenant="acme"', 'kind="prompt"'])).toBe(120);
    expect(series('q_dispatcher_batch_tokens', ['tenant="acme"', 'kind="completion"'])).toBe(80);
    expect(series('q_dispatcher_batch_requests', ['tenant="acme"', 'outcome="completed"'])).toBe(40);
    const listed = await c.batches.list({ limit: 10 });
    expect(listed.data.map((b) => b.id)).toContain(created.id);
  });

  it('a file with a bad line, a duplicate custom_id, a wrong method and a mismatched url fails at validation naming the lines; nothing is dispatched', async () => {
    const c = client(KEYS.acme);
    const before = server.calls.length;
    const file = await upload(c, [
      chatLine('ok-1'),
      'not json',
      chatLine('ok-1'),
      chatLine('get', { method: 'GET' }),
      chatLine('emb', { url: '/v1/embeddings' }),
      chatLine('ok-2'),
    ]);
    const created = await c.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const done = await settled(c, created.id);
    expect(done.status).toBe('failed');
    expect(done.errors?.data?.map((e) => [e.line, e.code])).toEqual([
      [2, 'invalid_json_line'],
      [3, 'duplicate_custom_id'],
      [4, 'invalid_method'],
      [5, 'mismatched_endpoint'],
    ]);
    expect(done.output_file_id).toBeNull();
    expect(done.request_counts).toEqual({ total: 0, completed: 0, failed: 0 });
    expect(server.calls.length).toBe(before);
  });

  it('a bad create request is a 400 naming the field', async () => {
    const c = client(KEYS.acme);
    const file = await upload(c, [chatLine('x')]);
    await expect(
      c.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '48h' as '24h' }),
    ).rejects.toMatchObject({
      status: 400,
      param: 'completion_window',
    });
    await expect(
      c.batches.create({ input_file_id: file.id, endpoint: '/v1/nope' as '/v1/embeddings', completion_window: '24h' }),
    ).rejects.toMatchObject({
      status: 400,
      param: 'endpoint',
    });
  });

  it('an upload over the line or byte limit, or with another purpose, is a 400 and leaves no file', async () => {
    const c = client(KEYS.acme);
    const before = (await c.files.list()).data.length;
    await expect(
      upload(
        c,
        Array.from({ length: 101 }, (_, i) => chatLine(`l-${i}`)),
      ),
    ).rejects.toMatchObject({
      status: 400,
      message: expect.stringContaining('at most 100 lines') as unknown,
    });
    await expect(upload(c, [chatLine('big', { body: { pad: 'x'.repeat(70 * 1024) } })])).rejects.toMatchObject({
      status: 400,
      message: expect.stringContaining(`at most ${64 * 1024} bytes`) as unknown,
    });
    await expect(
      c.files.create({ file: await toFile(Buffer.from(`${chatLine('p')}\n`), 'p.jsonl'), purpose: 'fine-tune' }),
    ).rejects.toMatchObject({
      status: 400,
      param: 'purpose',
    });
    expect((await c.files.list()).data.length).toBe(before);
  });

  it("a tenant gets 404 for another tenant's files and batches, and does not list them", async () => {
    const acme = client(KEYS.acme);
    const other = client(KEYS.other);
    const file = await upload(acme, [chatLine('mine')]);
    const batch = await acme.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await expect(other.files.retrieve(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.content(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.delete(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.batches.retrieve(batch.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.batches.cancel(batch.id)).rejects.toMatchObject({ status: 404 });
    await expect(
      other.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
    ).rejects.toMatchObject({
      status: 400,
    });
    expect((await other.batches.list()).data).toEqual([]);
    expect((await other.files.list()).data).toEqual([]);
    expect((await acme.files.retrieve(file.id)).id).toBe(file.id);
  });

  it('cancel: lines not yet dispatched are cancelled at once, those in flight finish; each custom_id once in the output or error file', async () => {
    const c = client(KEYS.acme);
    const ids = Array.from({ length: 24 }, (_, i) => `slow-${i}`);
    const file = await upload(
      c,
      ids.map((id) => chatLine(id)),
    );
    const created = await c.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    // The concurrency gate (4) holds the rest back while the first ones are in flight.
    await waitFor(async () => server.current.get('acme') === 4, 20_000, 'four requests in flight');
    const cancelling = await c.batches.cancel(created.id);
    expect(cancelling.status).toBe('cancelling');
    const done = await settled(c, created.id);
    expect(done.status).toBe('cancelled');
    expect(done.cancelled_at).not.toBeNull();
    const read = async (id: string | null | undefined): Promise<{ custom_id: string; response: unknown; error: { code: string } | null }[]> =>
      id
        ? (await (await c.files.content(id)).text())
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l) as { custom_id: string; response: unknown; error: { code: string } | null })
        : [];
    const out = await read(done.output_file_id);
    const errs = await read(done.error_file_id);
    expect([...out, ...errs].map((l) => l.custom_id).sort()).toEqual([...ids].sort());
    expect(out.length).toBeGreaterThanOrEqual(4); // the four in flight finished
    expect(out.length).toBeLessThan(ids.length);
    expect(errs.every((l) => l.error?.code === 'batch_cancelled')).toBe(true);
    expect(done.request_counts).toEqual({ total: 24, completed: out.length, failed: errs.length });
  });

  it('a missing or unknown key is a 401 with no detail; a malformed id a 404, not a 500', async () => {
    await expect(client('sk-wrong').batches.list()).rejects.toMatchObject({ status: 401 });
    for (const headers of [{} as Record<string, string>, { authorization: 'Bearer sk-wrong' }, { authorization: `Basic ${KEYS.acme}` }]) {
      const res = await fetch(`${base}/files`, { headers });
      expect(res.status).toBe(401);
      const body = (await res.json()) as { error: { message: string } };
      expect(body.error.message).toBe('Unauthorized.');
    }
    const malformed = await fetch(`${base}/files/%E0%A4%A`, { headers: { authorization: `Bearer ${KEYS.acme}` } });
    expect(malformed.status).toBe(404);
  });
});

describe('Batch API: expiry', () => {
  it('a batch past its completion window expires: what finished is in the output, the rest batch_expired in the error file', async () => {
    const s = await createTestSchema('batchexp');
    const config = loadConfig({
      env: {},
      document: {
        url: s.dsn,
        health_port: -1,
        metrics_port: -1,
        poll_interval_ms: 50,
        lease_ttl_seconds: 5,
        queues: [{ queue_name: 'batch-q', igw_base_url: server.url, gates: [{ kind: 'concurrency', limit: 1 }] }],
        batch_api: {
          port: 0,
          api_keys: [{ sha256: hashApiKey(KEYS.acme), tenant: 'acme' }],
          driver_interval_ms: 50,
          completion_window_seconds: 4,
        },
      },
    });
    const short = await Dispatcher.start({ config });
    try {
      const c = new OpenAI({ apiKey: KEYS.acme, baseURL: `http://127.0.0.1:${short.batchApiPort}/v1`, maxRetries: 0 });
      const ids = Array.from({ length: 8 }, (_, i) => `slow-exp-${i}`);
      const file = await upload(
        c,
        ids.map((id) => chatLine(id)),
      );
      const created = await c.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
      expect(created.expires_at).toBe(created.created_at + 4);
      const done = await settled(c, created.id);
      expect(done.status).toBe('expired');
      expect(done.expired_at).not.toBeNull();
      const read = async (id: string | null | undefined): Promise<{ custom_id: string; error: { code: string } | null }[]> =>
        id
          ? (await (await c.files.content(id)).text())
              .trim()
              .split('\n')
              .map((l) => JSON.parse(l) as { custom_id: string; error: { code: string } | null })
          : [];
      const out = await read(done.output_file_id);
      const errs = await read(done.error_file_id);
      expect([...out, ...errs].map((l) => l.custom_id).sort()).toEqual([...ids].sort());
      expect(out.length).toBeGreaterThanOrEqual(1);
      expect(errs.length).toBeGreaterThanOrEqual(1);
      expect(errs.every((l) => l.error?.code === 'batch_expired')).toBe(true);
      expect(done.request_counts).toEqual({ total: 8, completed: out.length, failed: errs.length });
    } finally {
      await short.stop();
      await s.drop();
    }
  });
});
