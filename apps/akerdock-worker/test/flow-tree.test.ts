// `q-jobs flow show` draws an inference step (#41) by its request queue and request id, not by a
// job type and attempts it does not have.
import { describe, expect, it } from 'vitest';
import type { FlowJson, JobJson } from '../src/api/job-json.js';
import { flowTree } from '../src/cli/table.js';

const job = (over: Partial<JobJson>): JobJson =>
  ({ status: 'waiting', type: 't', attempt: 0, max_attempts: 5, error: null, payload: {}, ...over }) as JobJson;

describe('flowTree', () => {
  it('shows an inference step with its request queue and id', () => {
    const flow = {
      id: 'f1',
      name: null,
      created_at: '2026-01-01T00:00:00.000Z',
      finished_at: null,
      nodes: [
        { ref: 'ask', job: job({ type: 'q:request', max_attempts: 1, payload: { request: { id: 'r-1', queue: 'llm', deadline: 9 } } }) },
        { ref: 'use', job: job({ type: 'summarise' }) },
      ],
      edges: [{ parent: 'ask', child: 'use', on_failure: 'fail' }],
    } as unknown as FlowJson;
    expect(flowTree(flow).split('\n').slice(1)).toEqual(['ask  waiting  request llm r-1', '└─ use  waiting  summarise  0/5']);
  });

  it('shows an inference step still waiting for its parents as not sent', () => {
    const flow = {
      id: 'f1',
      name: null,
      created_at: '2026-01-01T00:00:00.000Z',
      finished_at: null,
      nodes: [
        { ref: 'prep', job: job({ type: 'prep' }) },
        { ref: 'ask', job: job({ type: 'q:request', max_attempts: 1, payload: { request: { queue: 'llm' } } }) },
      ],
      edges: [{ parent: 'prep', child: 'ask', on_failure: 'fail' }],
    } as unknown as FlowJson;
    expect(flowTree(flow).split('\n').slice(1)).toEqual(['prep  waiting  prep  0/5', '└─ ask  waiting  request llm (not sent)']);
  });
});
