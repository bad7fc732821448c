import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** Runs `openssl` in `dir` (its output discarded). */
export function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/**
 * A CA of the test's own (`ca.pem`, `ca.key`) and a server certificate it signed (`server.pem`,
 * `server.key`) that names only `model.internal`: reaching the server as 127.0.0.1 needs the
 * server name option. Written into `dir`.
 */
export function makeTestCa(dir: string): void {
  openssl(dir, 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=q test CA');
  fs.writeFileSync(path.join(dir, 'server.ext'), 'subjectAltName=DNS:model.internal\n');
  openssl(dir, 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=model.internal');
  openssl(
    dir,
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '1',
    '-extfile',
    'server.ext',
  );
}
