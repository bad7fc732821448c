// A batch whose driving dispatcher process is SIGKILLed mid-batch (issue 43): a second process
// takes over the batch's lease and the queue's partitions and finishes it; the output has every
// custom_id exactly once.
import net from 'node:net';
import OpenAI, { toFile } from 'openai';
import { waitFor } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { hashApiKey } from '../src/batch/api-keys.js';
import { useCliFixture } from './cli-harness.js';
import { testDocument } from './support/dispatcher-env.js';

const f = useCliFixture();
const KEY = 'sk-crash-0123456789';

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function configFile(name: string): Promise<{ file: string; base: string }> {
  const port = await freePort();
  const doc = testDocument(f.schema.dsn, {
    lease_ttl_seconds: 2,
    concurrency: 2,
    batch_size: 4,
    max_connections: 6,
    queues: [{ queue_name: 'bq', igw_base_url: f.server.url }],
    batch_api: { port, api_keys: [{ sha256: hashApiKey(KEY), tenant: 'acme' }], driver_interval_ms: 50, driver_lease_ms: 1500 },
  });
  return { file: f.tmpFile(name, JSON.stringify(doc)), base: `http://127.0.0.1:${port}/v1` };
}

async function listening(base: string): Promise<void> {
  await waitFor(async () => (await fetch(`${base}/files`).catch(() => undefined))?.status === 401, 60_000, `${base} to listen`);
}

describe('Batch API across dispatcher processes', () => {
  it('the process driving a batch is SIGKILLed mid-batch: another one finishes it, every custom_id exactly once', async () => {
    const ca = await configFile('a.json');
    const cb = await configFile('b.json');
    const a = f.startCli(['run', '--config', ca.file, '--log-level', 'warn']);
    await listening(ca.base);
    const clientA = new OpenAI({ apiKey: KEY, baseURL: ca.base, maxRetries: 0 });
    const ids = Array.from({ length: 300 }, (_, i) => `c-${i}`);
    const jsonl = ids
      .map((id) => JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/completions', body: { model: 'm', prompt: id } }))
      .join('\n');
    const file = await clientA.files.create({ file: await toFile(Buffer.from(jsonl), 'in.jsonl'), purpose: 'batch' });
    const batch = await clientA.batches.create({ input_file_id: file.id, endpoint: '/v1/completions', completion_window: '24h' });
    await waitFor(async () => (await clientA.batches.retrieve(batch.id)).request_counts!.completed >= 30, 60_000, '30 lines done');
    const b = f.startCli(['run', '--config', cb.file, '--log-level', 'warn']);
    await listening(cb.base);
    const before = await clientA.batches.retrieve(batch.id);
    expect(before.status).toBe('in_progress'); // a is still driving it
    expect(before.request_counts!.completed).toBeLessThan(300);
    a.child.kill('SIGKILL');
    await a.exit;
    const clientB = new OpenAI({ apiKey: KEY, baseURL: cb.base, maxRetries: 0 });
    const done = await waitFor(
      async () => {
        const got = await clientB.batches.retrieve(batch.id);
        return got.status === 'completed' ? got : undefined;
      },
      90_000,
      'the batch to complete on the second process',
    );
    expect(done.request_counts).toEqual({ total: 300, completed: 300, failed: 0 });
    const lines = (await (await clientB.files.content(done.output_file_id!)).text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { custom_id: string; response: { status_code: number } });
    expect(lines).toHaveLength(300);
    expect(lines.map((l) => l.custom_id).sort()).toEqual([...ids].sort());
    expect(lines.every((l) => l.response.status_code === 200)).toBe(true);
    b.child.kill('SIGTERM');
    expect(await b.exit).toBe(0);
  }, 180_000);
});
