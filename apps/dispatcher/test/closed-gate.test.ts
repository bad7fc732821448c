// Answers that need no endpoint call are written whatever the gates say (issue 35 item 3): while
// a queue's budget gate is closed — an endpoint-scrape failing closed, a local-max-concurrency
// queue gate at its limit — expired and cancelled requests still get DEADLINE_EXCEEDED and
// CANCELLED, and nothing is sent. Real Postgres, real gates, the fake endpoint on loopback.
import { describe, expect, it } from 'vitest';
import { Results, scenarioOf, submit, waitFor } from './helpers.js';
import { answerOk, useDispatcherEnv } from './support/dispatcher-env.js';

const env = useDispatcherEnv('closedgate', { behaviour: answerOk((s) => Number(/^d(\d+)$/.exec(s)?.[1] ?? 0)), record: true });

const DOC = { poll_interval_ms: 100, batch_size: 16, concurrency: 16, lease_ttl_seconds: 5 };

/** Submits one request that expires within a second and one cancelled at once; both must be answered without a call. */
async function expiredAndCancelled(queue: string, route: string): Promise<void> {
  const results = new Results(env.store, route);
  await submit(env.store, queue, route, [
    { id: `${queue}-expires`, deadlineIn: 1 },
    { id: `${queue}-cancelled`, deadlineIn: 120 },
  ]);
  expect(await env.store.cancel([`${queue}-cancelled`])).toEqual([`${queue}-cancelled`]);
  await results.waitFor([`${queue}-expires`, `${queue}-cancelled`], 15_000);
  expect(results.one(`${queue}-expires`)).toMatchObject({ error_code: 'DEADLINE_EXCEEDED' });
  expect(results.one(`${queue}-cancelled`)).toMatchObject({ error_code: 'CANCELLED' });
  expect(env.server.calls.filter((c) => scenarioOf(c).id.startsWith(`${queue}-e`) || scenarioOf(c).id.startsWith(`${queue}-c`))).toEqual([]);
}

describe('a closed budget gate', () => {
  it('endpoint-scrape failing closed (nothing listens): expired and cancelled requests are answered', async () => {
    const d = await env.start({
      ...DOC,
      queues: [
        {
          queue_name: 'scrape',
          igw_base_url: env.server.url,
          // Port 9 (discard) is closed on loopback: every scrape fails, the fallback 0 is the budget.
          gate_type: 'endpoint-scrape',
          gate_params: { url: 'http://127.0.0.1:9/metrics', metric: 'vllm:num_requests_running', max_count_per_pod: 10 },
        },
      ],
    });
    // The gate really is closed: an ordinary request is not sent.
    await submit(env.store, 'scrape', 'scrape-out', [{ id: 'scrape-ordinary', deadlineIn: 120 }]);
    await expiredAndCancelled('scrape', 'scrape-out');
    expect(env.server.calls.filter((c) => scenarioOf(c).id === 'scrape-ordinary')).toEqual([]);
    await d.stop();
  }, 60_000);

  it('a local-max-concurrency queue gate at its limit: expired and cancelled requests are answered meanwhile', async () => {
    const d = await env.start({
      ...DOC,
      queues: [{ queue_name: 'local', igw_base_url: env.server.url, gate_type: 'local-max-concurrency', gate_params: { limit: 1 } }],
    });
    const results = new Results(env.store, 'local-out');
    // One long call holds the gate's only slot for 8 s.
    await submit(env.store, 'local', 'local-out', [{ id: 'local-long', scenario: 'd8000', deadlineIn: 120 }]);
    await waitFor(() => env.server.calls.some((c) => scenarioOf(c).id === 'local-long'), 15_000, 'the long call');
    const t0 = Date.now();
    await expiredAndCancelled('local', 'local-out');
    // Answered while the gate was still full, not after the long call ended.
    expect(Date.now() - t0).toBeLessThan(7000);
    await results.drain();
    expect(results.byId.has('local-long')).toBe(false);
    await d.stop();
  }, 60_000);
});
