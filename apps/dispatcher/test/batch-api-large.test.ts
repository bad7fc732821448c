// A 200 MB, 50,000-line upload and its download through the Batch API (issue 43), against a
// `q-dispatcher run` process: the file is streamed into Postgres a page of lines at a time and back
// out the same way, so that process's peak resident memory (Linux VmHWM) grows by far less than
// the file. Prints what it measured.
import fs from 'node:fs';
import net from 'node:net';
import { waitFor } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { hashApiKey } from '../src/batch/api-keys.js';
import { useCliFixture } from './cli-harness.js';
import { testDocument } from './support/dispatcher-env.js';

const f = useCliFixture();
const KEY = 'sk-large-0123456789';
const LINES = 50_000;
const SIZE = 200 * 1024 * 1024;

/** A Linux process's resident memory now (`VmRSS`) and at its peak (`VmHWM`), bytes. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** A multipart body of exactly SIZE bytes of file content in LINES lines, generated as it is read. */
function multipart(boundary: string): ReadableStream<Uint8Array> {
  const lineBytes = SIZE / LINES; // 4,194.304: lines alternate so the total is exact
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  let i = 0;
  let written = 0;
  let sentHead = false;
  return new ReadableStream<Uint8Array>({
    pull(ctl) {
      if (!sentHead) {
        sentHead = true;
        ctl.enqueue(head);
        return;
      }
      if (i >= LINES) {
        ctl.enqueue(tail);
        ctl.close();
        return;
      }
      const parts: Buffer[] = [];
      for (let k = 0; k < 200 && i < LINES; k++, i++) {
        const target = Math.round(lineBytes * (i + 1)) - written;
        const prefix = `{"custom_id":"r-${i}","method":"POST","url":"/v1/chat/completions","body":{"pad":"`;
        const suffix = '"}}\n';
        parts.push(Buffer.from(prefix + 'x'.repeat(target - prefix.length - suffix.length) + suffix));
        written += target;
      }
      ctl.enqueue(Buffer.concat(parts));
    },
  });
}

describe('Batch API: a 200 MB file', () => {
  it.runIf(process.platform === 'linux')(
    'uploads and downloads 200 MB / 50,000 lines with the API process peak RSS growing by far less than the file',
    async () => {
      const port = await freePort();
      const base = `http://127.0.0.1:${port}/v1`;
      const doc = testDocument(f.schema.dsn, {
        queues: [{ queue_name: 'big', igw_base_url: f.server.url }],
        batch_api: { port, api_keys: [{ sha256: hashApiKey(KEY), tenant: 'acme' }] },
      });
      const p = f.startCli(['run', '--config', f.tmpFile('big.json', JSON.stringify(doc)), '--log-level', 'warn']);
      await waitFor(async () => (await fetch(`${base}/files`).catch(() => undefined))?.status === 401, 60_000, 'the API to listen');
      const pid = p.child.pid!;
      const before = memoryOf(pid);
      const boundary = 'qbatchboundary7d1f';
      const res = await fetch(`${base}/files`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
        body: multipart(boundary),
        duplex: 'half',
      } as RequestInit);
      expect(res.status).toBe(200);
      const file = (await res.json()) as { id: string; bytes: number };
      expect(file.bytes).toBe(SIZE);
      const afterUpload = memoryOf(pid);
      const content = await fetch(`${base}/files/${file.id}/content`, { headers: { authorization: `Bearer ${KEY}` } });
      let bytes = 0;
      let lines = 0;
      for await (const chunk of content.body as unknown as AsyncIterable<Uint8Array>) {
        bytes += chunk.byteLength;
        for (const b of chunk) if (b === 10) lines++;
      }
      const afterDownload = memoryOf(pid);
      expect(bytes).toBe(SIZE);
      expect(lines).toBe(LINES);
      const mb = (n: number): number => Math.round(n / 1024 / 1024);
      console.log(
        `batch api, 200 MB file: API process RSS ${mb(before.rss)} MB at start; peak ${mb(afterUpload.peak)} MB through the upload, ${mb(afterDownload.peak)} MB through the download`,
      );
      expect(afterUpload.peak - before.rss).toBeLessThan(SIZE / 2);
      expect(afterDownload.peak - before.rss).toBeLessThan(SIZE / 2);
      p.child.kill('SIGTERM');
      expect(await p.exit).toBe(0);
    },
    240_000,
  );
});
