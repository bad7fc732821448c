// The CLI commands as child processes: a bad config, submit, status, cancel.
import { describe, expect, it } from 'vitest';
import { useCliFixture } from './cli-harness.js';

const f = useCliFixture();

describe('CLI', () => {
  it('a bad config is refused with a clear error naming the field', async () => {
    const cfg = f.tmpFile(
      'bad.yaml',
      'queues:\n  - queue_name: q\n    igw_base_url: http://127.0.0.1:1\n    gates:\n      - kind: concurrency\n        limit: -2\n',
    );
    const p = f.startCli(['run', '--config', cfg]);
    expect(await p.exit).toBe(2);
    expect(p.err()).toContain('config: queues[0].gates[0].limit must be >= 1');
  }, 90_000);

  it('submit, status and cancel against a database', async () => {
    const deadline = Math.floor(Date.now() / 1000) + 600;
    const file = f.tmpFile(
      'reqs.jsonl',
      [1, 2, 3].map((i) => JSON.stringify({ id: `cli-${i}`, deadline, payload: { prompt: i } })).join('\n') + '\n',
    );
    const env = { Q_DSN: f.schema.dsn };
    const s = f.startCli(['submit', '--queue', 'cliq', '--route', 'cli-out', '--file', file], env);
    expect(await s.exit).toBe(0);
    expect(s.out()).toContain('submitted 3 requests to queue cliq');
    const st = f.startCli(['status', '--queue', 'cliq', '--route', 'cli-out', '--json'], env);
    expect(await st.exit).toBe(0);
    expect(JSON.parse(st.out())[0]).toMatchObject({ queue: 'cliq', backlog: 3, resultsWaiting: 0 });
    const c = f.startCli(['cancel', 'cli-1'], env);
    expect(await c.exit).toBe(0);
    const { rows } = await f.schema.pool().query<{ n: string }>(`SELECT count(*) AS n FROM q_requests WHERE queue = 'cliq' AND cancelled <> 0`);
    expect(Number(rows[0]!.n)).toBe(1);
  }, 150_000);

  it('submit --route of 3,000 characters is refused before anything is written (issue #14 item 19)', async () => {
    const file = f.tmpFile(
      'long-route.jsonl',
      `${JSON.stringify({ id: 'cli-long', deadline: Math.floor(Date.now() / 1000) + 600, payload: {} })}\n`,
    );
    const s = f.startCli(['submit', '--queue', 'cliq-long', '--route', 'r'.repeat(3000), '--file', file], { Q_DSN: f.schema.dsn });
    expect(await s.exit).toBe(2);
    expect(s.err()).toContain('submit: --route must be at most 2048 bytes (got 3000)');
    const { rows } = await f.schema.pool().query<{ n: string }>(`SELECT count(*) AS n FROM q_requests WHERE queue = 'cliq-long'`);
    expect(Number(rows[0]!.n)).toBe(0);
  }, 90_000);
});
