// A new CommonJS project and a new ESM project each install the packed tarballs of every
// publishable q package (as npm users would) and make real calls on PostgreSQL.
import fs from 'node:fs';
import path from 'node:path';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { here, packAll, repo, run, type Packed } from './packed.js';

let packed: Packed;
let tmp: string;
const schemas: TestSchema[] = [];
let tarballs: string[] = [];

beforeAll(async () => {
  packed = await packAll('q-consumers-');
  tmp = packed.dir;
  tarballs = packed.tarballs;
}, 300_000);
afterAll(async () => {
  await Promise.all(schemas.map((s) => s.drop()));
  packed?.dispose();
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
      'dashboard',
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
      loaded: { metric: 'q.jobs.duration.seconds', classes: ['function', 'function', 'function', 'function'] },
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

it('TypeScript compiles a CommonJS file that imports q (module nodenext: a require of ESM)', async () => {
  const cjs = await project('commonjs');
  fs.writeFileSync(
    path.join(cjs, 'check.cts'),
    [
      "import { JobQueue } from '@q/job-worker';",
      "import { createQuota } from '@q/quota';",
      "import { isQError } from '@q/schema';",
      'export const open: (dsn: string) => Promise<JobQueue> = (dsn) => JobQueue.open(dsn);',
      'export const quota: typeof createQuota = createQuota;',
      'export const isError: (e: unknown) => boolean = isQError;',
      '',
    ].join('\n'),
  );
  const tscPath = path.join(repo, 'node_modules', 'typescript', 'bin', 'tsc');
  const tsc = (module: string) =>
    run(process.execPath, [tscPath, '--noEmit', '--strict', '--skipLibCheck', '--module', module, '--moduleResolution', module, 'check.cts'], {
      cwd: cjs,
    });
  await expect(tsc('nodenext')).resolves.toBeDefined();
  // The same file under node16 rules, which have no require of ESM, is refused: the check can fail.
  await expect(tsc('node16')).rejects.toMatchObject({ stdout: expect.stringContaining('TS1479') });
}, 240_000);

it('installing the packages pulls in no optional peer (drizzle-orm stays out)', async () => {
  const esm = await project('module');
  expect(fs.existsSync(path.join(esm, 'node_modules', 'drizzle-orm'))).toBe(false);
}, 240_000);
