// Packs every publishable q package as npm users receive it (pnpm pack rewrites workspace:
// ranges to the packed versions), once per test file.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { buildIfStale } from '@q/testing';

export const run = promisify(execFile);
export const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, '..', '..', '..');
/** The publishable packages, dependencies first, so a stale dist is rebuilt before its dependants. */
export const PUBLISHED = ['schema', 'otel', 'store', 'quota', 'partition-consumer', 'job-worker', 'dashboard'] as const;

export interface Packed {
  /** A scratch folder holding the tarballs; remove it with `dispose`. */
  dir: string;
  /** Tarball paths, in the order of `PUBLISHED`. */
  tarballs: string[];
  dispose(): void;
}

export async function packAll(prefix: string): Promise<Packed> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  for (const name of PUBLISHED) await buildIfStale(path.join(repo, 'packages', name));
  const tarballs = await Promise.all(
    PUBLISHED.map(async (name) => {
      const { stdout } = await run('pnpm', ['pack', '--pack-destination', dir], { cwd: path.join(repo, 'packages', name) });
      return stdout.trim().split('\n').pop()!.trim();
    }),
  );
  return { dir, tarballs, dispose: () => fs.rmSync(dir, { recursive: true, force: true }) };
}
