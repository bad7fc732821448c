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
});
