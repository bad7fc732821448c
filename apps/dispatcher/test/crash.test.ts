// Two dispatcher processes on one queue; one is SIGKILLed mid-run.
import { describe, expect, it } from 'vitest';
import { Results, submit, waitFor } from './helpers.js';
import { useCliFixture } from './cli-harness.js';
import { testDocument } from './support/dispatcher-env.js';

const f = useCliFixture();

describe('two dispatcher processes', () => {
  it('one SIGKILLed mid-run: every request ends with exactly one result', async () => {
    const cfg = f.tmpFile(
      'two.json',
      JSON.stringify(
        testDocument(f.schema.dsn, {
          lease_ttl_seconds: 2,
          concurrency: 8,
          batch_size: 8,
          max_connections: 4,
          queues: [{ queue_name: 'crash', igw_base_url: f.server.url, result_queue_name: 'crash-out' }],
        }),
      ),
    );
    const a = f.startCli(['run', '--config', cfg, '--log-level', 'warn']);
    const b = f.startCli(['run', '--config', cfg, '--log-level', 'warn']);
    const ids = Array.from({ length: 120 }, (_, i) => `k-${i}`);
    await submit(
      f.store,
      'crash',
      'crash-out',
      ids.map((id) => ({ id })),
    );
    const results = new Results(f.store, 'crash-out');
    await waitFor(
      async () => {
        await results.drain();
        return results.count >= 30;
      },
      60_000,
      '30 results',
    );
    a.child.kill('SIGKILL');
    await a.exit;
    await results.waitFor(ids, 90_000);
    await new Promise((r) => setTimeout(r, 500));
    await results.drain();
    expect(results.count).toBe(ids.length);
    for (const id of ids) expect(results.one(id)).toMatchObject({ status_code: 200 });
    b.child.kill('SIGTERM');
    expect(await b.exit).toBe(0);
    const { rows } = await f.schema.pool().query<{ n: string }>(`SELECT count(*) AS n FROM q_requests WHERE queue = 'crash'`);
    expect(Number(rows[0]!.n)).toBe(0);
  }, 150_000);
});
