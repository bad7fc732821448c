// A new CommonJS project and a new ESM project each install the packed tarballs of every
// publishable q package (as npm users would) and make real calls on PostgreSQL.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { buildIfStale, createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..', '..');
// Dependencies first, so a stale dist is rebuilt before its dependants.
const PUBLISHED = ['schema', 'otel', 'store', 'quota', 'partition-consumer', 'job-worker'];

let tmp: string;
const schemas: TestSchema[] = [];
let tarballs: string[] = [];

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'q-consumers-'));
  for (const name of PUBLISHED) await buildIfStale(path.join(repo, 'packages', name));
  // pnpm pack rewrites workspace:* dependencies to the packed versions.
  tarballs = await Promise.all(
    PUBLISHED.map(async (name) => {
      const { stdout } = await run('pnpm', ['pack', '--pack-destination', tmp], { cwd: path.join(repo, 'packages', name) });
      return stdout.trim().split('\n').pop()!.trim();
    }),
  );
}, 300_000);
afterAll(async () => {
  await Promise.all(schemas.map((s) => s.drop()));
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const projects = new Map<string, Promise<string>>();

/** A new project of `type` with the tarballs installed (no optional peers) and its probe as index.js; made once per run. */
function project(type: 'commonjs' | 'module'): Promise<string> {
  let p = projects.get(type);
  if (!p) {
    p = makeProject(type);
    projects.set(type, p);
  }
  return p;
}

async function makeProject(type: 'commonjs' | 'module'): Promise<string> {
  const dir = path.join(tmp, type);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: `q-${type}-consumer`, private: true, type }));
  fs.copyFileSync(path.join(here, type === 'commonjs' ? 'probe.cjs' : 'probe.mjs'), path.join(dir, 'index.js'));
  fs.copyFileSync(path.join(here, 'calls.cjs'), path.join(dir, 'calls.cjs'));
  fs.copyFileSync(
    path.join(here, type === 'commonjs' ? 'ten-line.cjs' : 'ten-line.mjs'),
    path.join(dir, type === 'commonjs' ? 'ten-line.cjs' : 'ten-line.mjs'),
  );
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', ...tarballs], { cwd: dir, timeout: 120_000 });
  return dir;
}

it('a CommonJS project and an ESM project install the packed packages and run jobs, quota and telemetry calls', async () => {
  const t0 = Date.now();
  const [cjs, esm] = await Promise.all([project('commonjs'), project('module')]);
  const installMs = Date.now() - t0;
  for (const dir of [cjs, esm]) {
    expect(fs.readdirSync(path.join(dir, 'node_modules', '@q')).sort()).toEqual([
      'job-worker',
      'otel',
      'partition-consumer',
      'quota',
      'schema',
      'store',
    ]);
  }
  const probe = async (dir: string) => {
    const schema = await createTestSchema('qconsumer');
    schemas.push(schema);
    // Without NODE_PATH (pnpm sets it to its store), so only the project's node_modules resolves.
    const { NODE_PATH: _unused, ...env } = process.env;
    const { stdout, stderr } = await run(process.execPath, ['index.js'], { cwd: dir, env: { ...env, PROBE_DSN: schema.dsn }, timeout: 60_000 });
    return { out: JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>, stderr };
  };
  const results = await Promise.all([probe(cjs), probe(esm)]);
  for (const [i, { out, stderr }] of results.entries()) {
    expect(out).toEqual({
      kind: i === 0 ? 'cjs' : 'esm',
      quota: { first: true, second: false },
      job: { status: 'succeeded', result: { n: 42 } },
      badDsn: 'QError UNSUPPORTED_DSN',
      sdk: 'QError CONFIG with install line',
      loaded: { metric: 'q.jobs.duration.seconds', classes: ['function', 'function', 'function'] },
    });
    // require(esm) is not experimental any more on this Node: no warning for the user.
    expect(stderr).not.toMatch(/ExperimentalWarning/);
  }
  console.log(`consumers: pack+install ${installMs} ms, total ${Date.now() - t0} ms`);
}, 240_000);

it('the README ten-line job queue example runs in a new CommonJS project and a new ESM project', async () => {
  const [cjs, esm] = await Promise.all([project('commonjs'), project('module')]);
  const runExample = async (dir: string, file: string) => {
    const schema = await createTestSchema('qtenline');
    schemas.push(schema);
    const { NODE_PATH: _unused, ...env } = process.env;
    const { stdout } = await run(process.execPath, [file], { cwd: dir, env: { ...env, DATABASE_URL: schema.dsn }, timeout: 60_000 });
    return JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>;
  };
  expect(await Promise.all([runExample(cjs, 'ten-line.cjs'), runExample(esm, 'ten-line.mjs')])).toEqual([
    { kind: 'cjs', status: 'succeeded', result: { delivered: 'a@example.com' } },
    { kind: 'esm', status: 'succeeded', result: { delivered: 'a@example.com' } },
  ]);
}, 240_000);
