// The Batch API end to end with nothing of ours at either end (issue 43): the official `openai`
// client (6.49.0) as the client and `@dwmkerr/mock-llm` as the model server, which answers a chat
// completion with the last user message. Every custom_id is in the output exactly once, with the
// answer to its own line.
import OpenAI, { toFile } from 'openai';
import { createTestSchema, waitFor, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../src/batch/api-keys.js';
import { loadConfig } from '../src/config/load.js';
import { Dispatcher } from '../src/service/dispatcher.js';
import { useMockLlm } from './support/mock-llm.js';

const mock = useMockLlm();
let schema: TestSchema;
let d: Dispatcher;
const KEY = 'sk-mock-0123456789';

beforeAll(async () => {
  schema = await createTestSchema('batchmock');
  const config = loadConfig({
    env: {},
    document: {
      url: schema.dsn,
      health_port: -1,
      metrics_port: -1,
      poll_interval_ms: 50,
      queues: [{ queue_name: 'mock', igw_base_url: mock.url, gates: [{ kind: 'concurrency', limit: 8 }] }],
      batch_api: { port: 0, api_keys: [{ sha256: hashApiKey(KEY), tenant: 'acme' }], driver_interval_ms: 50 },
    },
  });
  d = await Dispatcher.start({ config });
}, 60_000);

afterAll(async () => {
  await d?.stop();
  await schema?.drop();
});

describe('Batch API: openai client against @dwmkerr/mock-llm', () => {
  it('200 chat completions: batch completed, every custom_id once with the echo of its own message', async () => {
    const c = new OpenAI({ apiKey: KEY, baseURL: `http://127.0.0.1:${d.batchApiPort}/v1`, maxRetries: 0 });
    const ids = Array.from({ length: 200 }, (_, i) => `m-${i}`);
    const jsonl = ids
      .map((id) =>
        JSON.stringify({
          custom_id: id,
          method: 'POST',
          url: '/v1/chat/completions',
          body: { model: 'gpt-4o', messages: [{ role: 'user', content: `say ${id}` }] },
        }),
      )
      .join('\n');
    const file = await c.files.create({ file: await toFile(Buffer.from(jsonl), 'chat.jsonl'), purpose: 'batch' });
    const created = await c.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const done = await waitFor(
      async () => {
        const b = await c.batches.retrieve(created.id);
        return ['completed', 'failed', 'expired', 'cancelled'].includes(b.status) ? b : undefined;
      },
      60_000,
      'the batch to finish',
    );
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: 200, completed: 200, failed: 0 });
    const lines = (await (await c.files.content(done.output_file_id!)).text())
      .trim()
      .split('\n')
      .map(
        (l) => JSON.parse(l) as { custom_id: string; response: { status_code: number; body: { choices: { message: { content: string } }[] } } },
      );
    expect(lines.map((l) => l.custom_id).sort()).toEqual([...ids].sort());
    for (const l of lines) {
      expect(l.response.status_code).toBe(200);
      expect(l.response.body.choices[0]!.message.content).toContain(`say ${l.custom_id}`);
    }
  });
});
