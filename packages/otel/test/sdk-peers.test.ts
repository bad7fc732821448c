// @q/otel/sdk without its optional peers: a QError naming the install line (not Node's bare
// ERR_MODULE_NOT_FOUND), from a CommonJS and an ESM consumer. The built entry is copied into a
// throw-away node_modules that has only @q/otel's real dependencies (@opentelemetry/api, @q/schema).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { buildIfStale } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SDK_INSTALL_COMMAND } from '../src/sdk.js';

const run = promisify(execFile);
const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repo = path.resolve(pkgDir, '..', '..');
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as { peerDependencies: Record<string, string> };

let tmp: string;
beforeAll(async () => {
  for (const dir of [path.join(repo, 'packages', 'schema'), pkgDir]) await buildIfStale(dir);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'q-otel-peers-'));
  const nm = path.join(tmp, 'node_modules');
  // A copy, not a link: Node resolves from a link's real path, where the dev copies of the peers are.
  fs.cpSync(path.join(pkgDir, 'dist'), path.join(nm, '@q', 'otel', 'dist'), { recursive: true });
  fs.copyFileSync(path.join(pkgDir, 'package.json'), path.join(nm, '@q', 'otel', 'package.json'));
  const require = createRequire(path.join(pkgDir, 'package.json'));
  fs.mkdirSync(path.join(nm, '@opentelemetry'), { recursive: true });
  fs.symlinkSync(path.resolve(path.dirname(require.resolve('@opentelemetry/api')), '..', '..'), path.join(nm, '@opentelemetry', 'api'));
  fs.symlinkSync(path.join(repo, 'packages', 'schema'), path.join(nm, '@q', 'schema'));
}, 240_000);
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

describe('@q/otel/sdk without its peers', () => {
  const probe = (isCjs: boolean) => `${
    isCjs
      ? `const { startTelemetry } = require('@q/otel/sdk'); const { isQError } = require('@q/schema');`
      : `import { startTelemetry } from '@q/otel/sdk'; import { isQError } from '@q/schema';`
  }
try {
  startTelemetry({ serviceName: 'peerless' });
  console.log(JSON.stringify({ started: true }));
} catch (err) {
  console.log(JSON.stringify({ isQError: isQError(err, 'CONFIG'), name: err.name, code: err.code, message: err.message }));
}
`;

  it.each([
    ['CommonJS', 'probe.cjs'],
    ['ESM', 'probe.mjs'],
  ])('%s: importing works, startTelemetry throws QError CONFIG with the install line', async (_kind, file) => {
    fs.writeFileSync(path.join(tmp, file), probe(file.endsWith('.cjs')));
    // Without NODE_PATH (pnpm sets it to its store): only the throw-away node_modules resolves.
    const { NODE_PATH: _ignored, ...env } = process.env;
    const { stdout, stderr } = await run(process.execPath, [file], { cwd: tmp, env, timeout: 30_000 });
    expect(stderr).toBe('');
    const out = JSON.parse(stdout.trim()) as { isQError: boolean; name: string; code: string; message: string };
    expect(out).toMatchObject({ isQError: true, name: 'QError', code: 'CONFIG' });
    expect(out.message).toContain(`Install them with: ${SDK_INSTALL_COMMAND}`);
    for (const name of Object.keys(pkg.peerDependencies)) expect(out.message).toContain(name);
    expect(out.message).not.toContain('ERR_MODULE_NOT_FOUND');
  });
});

describe('the install line', () => {
  it('installs every optional peer at its package.json range', () => {
    const words = SDK_INSTALL_COMMAND.split(' ');
    expect(words.slice(0, 3)).toEqual(['npm', 'install', '@q/otel']);
    const ranges = Object.fromEntries(words.slice(3).map((w) => [w.slice(0, w.lastIndexOf('@')), w.slice(w.lastIndexOf('@') + 1)]));
    expect(ranges).toEqual(pkg.peerDependencies);
  });

  it('is the one documented in the README and docs/telemetry.md', () => {
    for (const doc of [path.join(pkgDir, 'README.md'), path.join(repo, 'docs', 'telemetry.md')]) {
      expect(fs.readFileSync(doc, 'utf8').replace(/\s*\\\n\s*/g, ' ')).toContain(SDK_INSTALL_COMMAND);
    }
  });
});
