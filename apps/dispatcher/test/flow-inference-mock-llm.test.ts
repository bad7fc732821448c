// A flow's inference step served by the dispatcher against `@dwmkerr/mock-llm` (#41): the flow
// inserts the request, the dispatcher calls the model and acks the result on its queue's own
// configured route, and the node finishes in that ack with the model's chat-completion body, which
// releases its child.
import { afterAll, describe, expect, it } from 'vitest';
import { useStore, waitFor } from '@q/testing';
import { JobStore, RequestStore } from '@q/store';
import type { Dispatcher } from '../src/service/dispatcher.js';
import { useMockLlm } from './support/mock-llm.js';
import { startTestDispatcher } from './support/dispatcher-env.js';

const used = useStore(RequestStore, { prefix: 'flowllm', maxConns: 3 });
const mock = useMockLlm();
let dispatcher: Dispatcher | undefined;
let jobs: JobStore | undefined;

afterAll(async () => {
  await dispatcher?.stop();
  await jobs?.close();
});

describe('an inference step served by the dispatcher', () => {
  it('finishes with the model body in the ack, and its child is released', async () => {
    jobs = await JobStore.open(used.schema.dsn, { maxConns: 2 }); // installs the job tables next to the request queue
    dispatcher = await startTestDispatcher(used.schema.dsn, {
      queues: [{ queue_name: 'chat', igw_base_url: mock.url, request_path_url: '/v1/chat/completions', result_queue_name: 'chat-out' }],
    });
    const { flowId } = await jobs.flows.insert({
      nodes: [
        {
          ref: 'ask',
          request: {
            queue: 'chat',
            payload: { model: 'gpt-4', messages: [{ role: 'user', content: 'hello from a flow' }] },
            deadline: Math.floor(Date.now() / 1000) + 60,
            tenant: 'tenant-f',
          },
        },
        { ref: 'use', type: 'summarise', queue: 'after', dependsOn: ['ask'] },
      ],
    });
    const flow = await waitFor(async () => {
      const f = await jobs!.flows.get(flowId);
      return f?.nodes.ask?.status === 'succeeded' ? f : undefined;
    }, 40_000);
    const body = flow.nodes.ask!.result as { object: string; choices: Array<{ message: { role: string; content: string } }> };
    expect(body.object).toBe('chat.completion');
    expect(body.choices[0]?.message).toEqual({ role: 'assistant', content: 'hello from a flow' });
    expect(flow.nodes.use!.status).toBe('queued');
    expect(await used.store.resultDepth('chat-out')).toBe(0); // the result went to the node, not the route
  }, 55_000);
});
