import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** The workspace root (this file is `packages/testing/src/build.ts`, or its `dist/` build). */
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** Newest modification time of a file under `dir` (0 when it is missing). */
export function newestMtime(dir: string): number {
  if (!fs.existsSync(dir)) return 0;
  let t = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) t = Math.max(t, fs.statSync(path.join(e.parentPath, e.name)).mtimeMs);
  }
  return t;
}

/**
 * Builds the workspace package in `packageDir` (`tsc -p tsconfig.build.json`) when its `dist/` is
 * missing or older than its `src/`: for tests of what is published (packed tarballs, copied
 * builds), which `pnpm test` has built already but a direct vitest run may not have.
 */
export async function buildIfStale(packageDir: string): Promise<void> {
  if (newestMtime(path.join(packageDir, 'src')) > newestMtime(path.join(packageDir, 'dist'))) {
    await run(path.join(repoRoot, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], { cwd: packageDir });
  }
}
