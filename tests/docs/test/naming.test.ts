// One file-naming style for SQL modules: every file under a `src/**/sql/` folder of packages/ or
// apps/ is kebab-case (`claim-jobs.ts`, `reset-stale.ts`), as the job store's have always been.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../src/repo.js';

const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.git', '.turbo', 'coverage']);

/** A file name whose stem (before the first dot) is lower-case words joined by single hyphens. */
function isKebabFile(name: string): boolean {
  return /^[a-z0-9]+(?:-[a-z0-9]+)*(?:\.[a-z0-9]+)+$/.test(name);
}

/** Every file (relative to the root) under a `sql` folder that sits somewhere below a `src` folder of `top`. */
function sqlFiles(dir: string, inSrc = false, inSql = false): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (SKIPPED_DIRS.has(entry.name)) continue;
      out.push(...sqlFiles(full, inSrc || entry.name === 'src', inSql || (inSrc && entry.name === 'sql')));
    } else if (entry.isFile() && inSql) {
      out.push(path.relative(ROOT, full));
    }
  }
  return out;
}

describe('SQL module file names', () => {
  const files = ['packages', 'apps'].flatMap((top) => sqlFiles(path.join(ROOT, top)));

  it('finds the SQL folders (the walk sees the job, request and quota statements)', () => {
    for (const known of [
      'packages/store/src/jobs/sql/claim-jobs.ts',
      'packages/store/src/requests/sql/reset-stale.ts',
      'packages/quota/src/sql/admit-quota.ts',
    ]) {
      expect(files).toContain(known);
    }
  });

  it('are kebab-case under every src/**/sql/ folder of packages/ and apps/', () => {
    expect(files.filter((f) => !isKebabFile(path.basename(f)))).toEqual([]);
  });

  it('the check refuses camelCase, PascalCase, snake_case and doubled hyphens (it can fail)', () => {
    for (const bad of ['resetStale.ts', 'ResetStale.ts', 'reset_stale.ts', 'reset--stale.ts', '-reset.ts', 'reset-.ts'])
      expect(isKebabFile(bad), bad).toBe(false);
    for (const good of ['ack.ts', 'reset-stale.ts', 'acquire-partitions.ts', 'q2-batch.ts']) expect(isKebabFile(good), good).toBe(true);
  });
});
