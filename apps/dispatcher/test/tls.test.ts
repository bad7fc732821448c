// TLS client options of the inference client (issue #19): CA file, client certificate and key
// (mutual TLS), server name, and the insecure flag, against an HTTPS server on loopback whose
// certificates `openssl` makes for the test.
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, readTlsFiles } from '../src/config/load.js';
import { InferenceClient, type TlsClientOptions } from '../src/http/client.js';
import { makeTestCa, openssl } from './support/certs.js';

let dir: string;
let server: https.Server;
let url: string;
const file = (n: string) => path.join(dir, n);

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qtls-'));
  makeTestCa(dir);
  openssl(dir, 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'client.key', '-out', 'client.csr', '-subj', '/CN=dispatcher');
  openssl(dir, 'x509', '-req', '-in', 'client.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'client.pem', '-days', '1');
  server = https.createServer(
    {
      key: fs.readFileSync(file('server.key')),
      cert: fs.readFileSync(file('server.pem')),
      ca: fs.readFileSync(file('ca.pem')),
      requestCert: true,
      rejectUnauthorized: false,
    },
    (req, res) => {
      const sock = req.socket as TLSSocket;
      const peer = sock.authorized ? (sock.getPeerCertificate().subject?.CN ?? '?') : 'none';
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ client: peer })));
    },
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1/completions`;
}, 30_000);

afterAll(async () => {
  await new Promise<void>((r) => {
    server?.closeAllConnections();
    server?.close(() => r());
  });
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const send = async (tls: TlsClientOptions | undefined) => {
  const c = new InferenceClient({ requestTimeoutMs: 5000, ...(tls ? { tls } : {}) });
  try {
    return await c.send(url, Buffer.from('{}'), { 'content-type': 'application/json' }, Date.now() + 10_000);
  } finally {
    await c.close();
  }
};

describe('TLS client options', () => {
  it('CA file + client certificate + server name: verified mutual TLS', async () => {
    const tls = readTlsFiles({
      tls_ca_file: file('ca.pem'),
      tls_cert_file: file('client.pem'),
      tls_key_file: file('client.key'),
      tls_server_name: 'model.internal',
      tls_insecure_skip_verify: false,
    });
    expect(await send(tls)).toEqual({ kind: 'success', status: 200, body: '{"client":"dispatcher"}' });
  });

  it('without the CA, or without the server name, verification fails (a transport error, no call)', async () => {
    const noCa = await send({ servername: 'model.internal' });
    expect(noCa).toMatchObject({ kind: 'fatal', category: 'UNKNOWN' });
    const wrongName = await send({ ca: fs.readFileSync(file('ca.pem')) });
    expect(wrongName).toMatchObject({ kind: 'fatal', category: 'UNKNOWN' });
    expect(wrongName.kind === 'fatal' && wrongName.message).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID|altnames/i);
  });

  it('insecure skip-verify connects without checking (no client certificate sent)', async () => {
    expect(await send({ insecureSkipVerify: true })).toEqual({ kind: 'success', status: 200, body: '{"client":"none"}' });
  });

  it('config: cert and key go together; an unreadable file is named, its content never shown', () => {
    const q = { queues: [{ queue_name: 'a', igw_base_url: 'https://127.0.0.1:9/' }] };
    expect(() => loadConfig({ env: {}, document: { ...q, tls_cert_file: file('client.pem') } })).toThrow(
      'config: tls_cert_file and tls_key_file go together',
    );
    expect(() => readTlsFiles({ tls_ca_file: file('missing.pem'), tls_insecure_skip_verify: false })).toThrow(
      `config: tls_ca_file: cannot read ${file('missing.pem')}: ENOENT`,
    );
    expect(loadConfig({ env: {}, document: { ...q, tls_insecure_skip_verify: true } }).tls_insecure_skip_verify).toBe(true);
  });
});
