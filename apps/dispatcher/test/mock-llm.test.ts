// End to end against a model server no one in this project wrote: the OpenAI-compatible mock
// server published on npm as `@dwmkerr/mock-llm` (pinned devDependency), started by the test on
// 127.0.0.1. Its default rule echoes the last user message in a chat completion.
import { afterAll, describe, expect, it } from 'vitest';
import { useStore } from '@q/testing';
import { RequestStore } from '@q/store';
import { submitRequests } from '../src/client/producer.js';
import type { Dispatcher } from '../src/service/dispatcher.js';
import { Results } from './helpers.js';
import { useMockLlm } from './support/mock-llm.js';
import { startTestDispatcher } from './support/dispatcher-env.js';

const used = useStore(RequestStore, { prefix: 'mockllm', maxConns: 3 });
const mock = useMockLlm();
let dispatcher: Dispatcher | undefined;

afterAll(async () => {
  await dispatcher?.stop();
});

describe('@dwmkerr/mock-llm end to end', () => {
  it('every request gets exactly one result carrying the server’s real chat-completion body', async () => {
    dispatcher = await startTestDispatcher(used.schema.dsn, {
      queues: [{ queue_name: 'chat', igw_base_url: mock.url, request_path_url: '/v1/chat/completions', result_queue_name: 'chat-out' }],
    });
    const deadline = Math.floor(Date.now() / 1000) + 60;
    const ids = Array.from({ length: 60 }, (_, i) => `chat-${i}`);
    await submitRequests(
      used.store,
      ids.map((id) => ({
        id,
        deadline,
        payload: {
          model: 'gpt-4',
          messages: [
            { role: 'system', content: 'be brief' },
            { role: 'user', content: `hello from ${id}` },
          ],
        },
        metadata: { userid: 'tenant-m' },
      })),
      { queue: 'chat', route: 'chat-out' },
    );
    const results = new Results(used.store, 'chat-out');
    await results.waitFor(ids, 40_000);
    expect(results.count).toBe(ids.length);
    for (const id of ids) {
      const r = results.one(id);
      expect(r.status_code).toBe(200);
      expect(r.error_code).toBeUndefined();
      const body = JSON.parse(r.payload) as { object: string; model: string; choices: Array<{ message: { role: string; content: string } }> };
      expect(body).toMatchObject({ object: 'chat.completion', model: 'gpt-4' });
      expect(body.choices[0]?.message).toEqual({ role: 'assistant', content: `hello from ${id}` });
    }
  }, 55_000);
});
