// Releases: a jobs-only changeset bumps only the packages it names. `changeset version` runs on a
// temporary copy of the workspace manifests, never on the repository itself.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const changesetBin = path.join(repo, 'node_modules', '@changesets', 'cli', 'bin.js');
const run = promisify(execFile);
const copies: string[] = [];

afterAll(() => {
  for (const dir of copies) fs.rmSync(dir, { recursive: true, force: true });
});

/** The workspace's manifests and changeset config (no pending changesets) in a fresh folder. */
function copyWorkspace(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'q-release-'));
  copies.push(dir);
  for (const f of ['package.json', 'pnpm-workspace.yaml', '.changeset/config.json']) {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.copyFileSync(path.join(repo, f), path.join(dir, f));
  }
  for (const group of ['packages', 'apps', 'tests']) {
    for (const name of fs.readdirSync(path.join(repo, group))) {
      const manifest = path.join(group, name, 'package.json');
      if (!fs.existsSync(path.join(repo, manifest))) continue;
      fs.mkdirSync(path.join(dir, group, name), { recursive: true });
      fs.copyFileSync(path.join(repo, manifest), path.join(dir, manifest));
    }
  }
  fs.mkdirSync(path.join(dir, 'bench'), { recursive: true });
  fs.copyFileSync(path.join(repo, 'bench', 'package.json'), path.join(dir, 'bench', 'package.json'));
  return dir;
}

function versions(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of fs.readdirSync(path.join(dir, 'packages'))) {
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'packages', name, 'package.json'), 'utf8')) as { name: string; version: string };
    out.set(m.name, m.version);
  }
  return out;
}

/** Runs `changeset version` with one changeset of `bumps` on a copy; returns the packages whose version changed. */
async function bumped(bumps: Record<string, 'patch' | 'minor'>): Promise<string[]> {
  const dir = copyWorkspace();
  const front = Object.entries(bumps)
    .map(([pkg, bump]) => `"${pkg}": ${bump}`)
    .join('\n');
  fs.writeFileSync(path.join(dir, '.changeset', 'jobs-change.md'), `---\n${front}\n---\n\nA change.\n`);
  const before = versions(dir);
  await run(process.execPath, [changesetBin, 'version'], { cwd: dir, env: { ...process.env, CI: 'true' } });
  const after = versions(dir);
  return [...after]
    .filter(([name, v]) => before.get(name) !== v)
    .map(([name]) => name)
    .sort();
}

describe('changeset version', () => {
  it('a jobs-only patch (@q/store, @q/job-worker) republishes neither @q/partition-consumer nor @q/quota', async () => {
    expect(await bumped({ '@q/store': 'patch' })).toEqual(['@q/store']);
    expect(await bumped({ '@q/store': 'patch', '@q/job-worker': 'patch' })).toEqual(['@q/job-worker', '@q/store']);
  }, 60_000);

  it('a bump that leaves the dependents’ range (0.x minor) does bump them', async () => {
    expect(await bumped({ '@q/store': 'minor' })).toEqual(['@q/dashboard', '@q/job-worker', '@q/partition-consumer', '@q/store']);
  }, 60_000);
});
