import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { buildIfStale, createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';

const run = promisify(execFile);
const packagesDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
// @q/quota's own dependencies among the workspace packages: packed and installed with it.
const PACKED = ['schema', 'otel', 'quota'];

let schema: TestSchema;
let tmp: string;

beforeAll(async () => {
  schema = await createTestSchema('qinstall');
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'q-quota-install-'));
});
afterAll(async () => {
  await schema?.drop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

it('installs alone from packed tarballs (no @q/store) and acquires and releases a slot', async () => {
  const tarballs: string[] = [];
  for (const name of PACKED) {
    const dir = path.join(packagesDir, name);
    await buildIfStale(dir);
    // pnpm pack rewrites workspace:* dependencies to the packed versions.
    const { stdout } = await run('pnpm', ['pack', '--pack-destination', tmp], { cwd: dir });
    const tgz = stdout.trim().split('\n').pop()!.trim();
    expect(tgz.endsWith('.tgz')).toBe(true);
    tarballs.push(tgz);
  }
  const project = path.join(tmp, 'app');
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'quota-alone', private: true, type: 'module' }));
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', ...tarballs], {
    cwd: project,
    timeout: 240_000,
  });
  expect(fs.readdirSync(path.join(project, 'node_modules', '@q')).sort()).toEqual(['otel', 'quota', 'schema']);
  fs.writeFileSync(
    path.join(project, 'probe.mjs'),
    `import { createQuota } from '@q/quota';
const quota = await createQuota({ dsn: process.env.QUOTA_DSN, ttlMs: 5000 });
const first = await quota.acquire('tenant:alone', 1);
const second = await quota.acquire('tenant:alone', 1);
await first?.();
const third = await quota.acquire('tenant:alone', 1);
await third?.();
await quota.close();
console.log(JSON.stringify({ first: first !== null, second: second !== null, third: third !== null }));
`,
  );
  const { stdout } = await run(process.execPath, ['probe.mjs'], {
    cwd: project,
    env: { ...process.env, QUOTA_DSN: schema.dsn },
    timeout: 60_000,
  });
  expect(JSON.parse(stdout.trim())).toEqual({ first: true, second: false, third: true });
  // Only the quota module was created in the schema.
  const { rows } = await schema
    .pool()
    .query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, [schema.name]);
  expect(rows.map((r) => r.table_name)).toEqual([
    'q_quota_admits',
    'q_quota_holders',
    'q_quota_keys',
    'q_quota_slots',
    'q_quota_windows',
    'q_schema_migrations',
  ]);
}, 420_000);
