// The embedded-default command (`q-dispatcher demo`) on a small batch.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCliFixture } from './cli-harness.js';

const f = useCliFixture();

describe('embedded default', () => {
  it('demo runs to completion on the embedded Postgres and prints the summary', async () => {
    const p = f.startCli(['demo', '--requests', '60', '--data-dir', path.join(f.tmp, 'pgdata'), '--rate-429', '0', '--rate-503', '0.05']);
    const code = await p.exit;
    if (code !== 0) throw new Error(`demo exited ${code}: ${p.err().slice(-2000)}`);
    expect(p.out()).toMatch(/\| results\s+\| 60\s+\|/);
    expect(p.out()).toMatch(/peak concurrency tenant-a\s+\| \d \/ limit 8/);
  }, 180_000);

  it('demo --saturation charts the server with and without the gate', async () => {
    const p = f.startCli(['demo', '--saturation', '--requests', '600', '--dsn', f.schema.dsn]);
    const code = await p.exit;
    if (code !== 0) throw new Error(`demo --saturation exited ${code}: ${p.err().slice(-2000)}`);
    expect(p.out()).toContain('with an endpoint-scrape gate at 0.8: draining 600 requests');
    expect(p.out()).toContain('without a gate: draining 600 requests');
    expect(p.out()).toMatch(/600\/600 results in [\d.]+ s; max saturation [\d.]+/);
    expect(p.out()).toContain('█');
    const max = [...p.out().matchAll(/max saturation ([\d.]+);/g)].map((m) => Number(m[1]));
    expect(max).toHaveLength(2);
    expect(max[0]).toBeLessThanOrEqual(0.8 + 32 / 96);
    expect(max[1]).toBeGreaterThan(1);
  }, 120_000);
});
