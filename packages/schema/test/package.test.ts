import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { MIGRATION_MODULES, bundledMigrations } from '../src/index.js';

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

it('the published package ships every migration of every module', () => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: pkgDir, encoding: 'utf8' });
  const files = new Set((JSON.parse(out) as Array<{ files: Array<{ path: string }> }>)[0]!.files.map((f) => f.path));
  for (const module of MIGRATION_MODULES) {
    expect(files.has(`drizzle/${module}/meta/_journal.json`)).toBe(true);
    for (const m of bundledMigrations(module)) expect(files.has(`drizzle/${module}/${m.tag}.sql`)).toBe(true);
  }
});
