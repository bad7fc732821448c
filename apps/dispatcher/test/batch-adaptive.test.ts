// Adaptive concurrency of batch traffic end to end (issue 43): a batch through the Batch API
// against a real local HTTP model server whose behaviour the test switches — fast answers, then
// 429s for a while, fast again, then answers slower than the latency target, fast again. The
// endpoint's window (the `q_dispatcher_adaptive_concurrency_limit` gauge) shrinks under the 429s
// and the slow answers and grows back after each; the calls the server sees in flight never
// exceed the configured max; and every custom_id is answered exactly once.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTestSchema, waitFor, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../src/batch/api-keys.js';
import { loadConfig } from '../src/config/load.js';
import { Dispatcher } from '../src/service/dispatcher.js';

const KEY = 'sk-aimd-0123456789';
const MAX = 10;
const LINES = 3000;

type Mode = 'fast' | '429' | 'slow';
let mode: Mode = 'fast';
let inFlight = 0;
let maxInFlight = 0;
let rateLimited = 0;
let server: http.Server;
let modelUrl: string;
let schema: TestSchema;
let d: Dispatcher;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      const reply = (status: number, body: unknown): void => {
        inFlight -= 1;
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      };
      if (mode === '429') {
        rateLimited += 1;
        setTimeout(() => reply(429, { error: { message: 'slow down' } }), 5);
        return;
      }
      const text = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { messages: { content: string }[] }).messages[0]!.content;
      setTimeout(
        () => reply(200, { object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: `echo ${text}` } }] }),
        mode === 'slow' ? 400 : 40,
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  modelUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  schema = await createTestSchema('batchaimd');
  const config = loadConfig({
    env: {},
    document: {
      url: schema.dsn,
      health_port: -1,
      metrics_port: 0,
      poll_interval_ms: 50,
      concurrency: 16,
      batch_size: 16,
      retry_base_ms: 20,
      retry_cap_ms: 200,
      queues: [{ queue_name: 'aimd', igw_base_url: modelUrl }],
      batch_api: {
        port: 0,
        api_keys: [{ sha256: hashApiKey(KEY), tenant: 'acme' }],
        driver_interval_ms: 50,
        adaptive_concurrency: { initial: 2, min: 1, max: MAX, latency_target_ms: 200, increase_step: 2, decrease_factor: 0.5 },
      },
    },
  });
  d = await Dispatcher.start({ config });
}, 60_000);

afterAll(async () => {
  await d?.stop();
  await schema?.drop();
  await new Promise((r) => server?.close(r));
});

/** The endpoint's current window, read from `/metrics`. */
async function windowNow(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${d.metricsPort}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith('q_dispatcher_adaptive_concurrency_limit{') && l.includes(`endpoint="${modelUrl}/v1/chat/completions"`));
  return Number(line?.split(' ').at(-1) ?? NaN);
}

describe('adaptive concurrency of batch traffic', () => {
  it('the window shrinks under 429s and slow answers, grows back after each, never past max; every line once', async () => {
    const base = `http://127.0.0.1:${d.batchApiPort}/v1`;
    const auth = { authorization: `Bearer ${KEY}` };
    const jsonl = Array.from({ length: LINES }, (_, i) =>
      JSON.stringify({
        custom_id: `a-${i}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'm', messages: [{ role: 'user', content: `n${i}` }] },
      }),
    ).join('\n');
    const form = new FormData();
    form.set('purpose', 'batch');
    form.set('file', new Blob([jsonl]), 'in.jsonl');
    const file = (await (await fetch(`${base}/files`, { method: 'POST', headers: auth, body: form })).json()) as { id: string };
    const created = (await (
      await fetch(`${base}/batches`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
      })
    ).json()) as { id: string };

    // Fast answers: from its initial 2 the window opens up to max.
    await waitFor(async () => (await windowNow()) === MAX || undefined, 30_000, 'the window to reach max');
    // 429s: it closes down.
    mode = '429';
    await waitFor(async () => (await windowNow()) <= 2 || undefined, 30_000, 'the window to shrink under 429s');
    expect(rateLimited).toBeGreaterThan(0);
    // Fast again: it grows back.
    mode = 'fast';
    await waitFor(async () => (await windowNow()) === MAX || undefined, 30_000, 'the window to grow back after the 429s');
    // Answers slower than the latency target: it closes down again.
    mode = 'slow';
    await waitFor(async () => (await windowNow()) <= 2 || undefined, 30_000, 'the window to shrink under slow answers');
    mode = 'fast';
    await waitFor(async () => (await windowNow()) === MAX || undefined, 30_000, 'the window to grow back after the slow answers');

    const done = await waitFor(
      async () => {
        const b = (await (await fetch(`${base}/batches/${created.id}`, { headers: auth })).json()) as {
          status: string;
          output_file_id: string | null;
          request_counts: { total: number; completed: number; failed: number };
        };
        return ['completed', 'failed', 'expired', 'cancelled'].includes(b.status) ? b : undefined;
      },
      120_000,
      'the batch to finish',
    );
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
    const out = await (await fetch(`${base}/files/${done.output_file_id}/content`, { headers: auth })).text();
    const seen = new Map<string, number>();
    for (const l of out.trim().split('\n')) {
      const o = JSON.parse(l) as { custom_id: string; response: { status_code: number } };
      expect(o.response.status_code).toBe(200);
      seen.set(o.custom_id, (seen.get(o.custom_id) ?? 0) + 1);
    }
    expect(seen.size).toBe(LINES);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    expect(maxInFlight).toBeLessThanOrEqual(MAX);
    expect(maxInFlight).toBe(MAX);
  }, 240_000);
});
