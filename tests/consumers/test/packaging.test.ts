// What a library author checks before publishing: each packed package lints clean (publint),
// its types resolve for ESM, CommonJS, node16 and bundlers (arethetypeswrong), `npm publish
// --dry-run` accepts it, and it carries the license and nothing that points nowhere.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PUBLISHED, packAll, repo, run, type Packed } from './packed.js';

const bin = (name: string) => path.join(repo, 'tests', 'consumers', 'node_modules', '.bin', name);
let packed: Packed;

beforeAll(async () => {
  packed = await packAll('q-packaging-');
}, 300_000);
afterAll(() => packed?.dispose());

/** The files of a tarball, and the text of the ones asked for (tar is on every machine CI runs on). */
async function tarball(file: string, read: string[]): Promise<{ files: string[]; text: Record<string, string> }> {
  const { stdout } = await run('tar', ['-tzf', file], { maxBuffer: 16 << 20 });
  const files = stdout.split('\n').filter(Boolean);
  const text: Record<string, string> = {};
  for (const f of read) text[f] = (await run('tar', ['-xzOf', file, f], { maxBuffer: 64 << 20 })).stdout;
  return { files, text };
}

describe.each(PUBLISHED.map((name, i) => [name, i] as const))('@q/%s, packed', (name, i) => {
  const tgz = () => packed.tarballs[i]!;

  it('passes publint', async () => {
    const { stdout } = await run(bin('publint'), ['run', tgz(), '--strict'], { cwd: packed.dir });
    expect(stdout).toContain('All good!');
  }, 120_000);

  it('has types that resolve for node10, node16 (ESM and CommonJS) and bundlers', async () => {
    // cjs-resolves-to-esm is the one rule left out: a CommonJS require() of q loads its ESM build,
    // which Node does natively from 20.19 on (q's engines floor); consumers.test.ts runs exactly that,
    // and the .cts check below proves TypeScript accepts it too.
    const { stdout } = await run(bin('attw'), [tgz(), '--format', 'json', '--ignore-rules', 'cjs-resolves-to-esm'], {
      cwd: packed.dir,
      maxBuffer: 64 << 20,
    }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
    const report = JSON.parse(stdout) as { analysis: { problems: { kind: string; entrypoint?: string; resolutionKind?: string }[] } };
    expect(report.analysis.problems.filter((p) => p.kind !== 'CJSResolvesToESM')).toEqual([]);
  }, 120_000);

  it('is accepted by npm publish --dry-run', async () => {
    const { stdout, stderr } = await run('npm', ['publish', '--dry-run', '--ignore-scripts', tgz()], { cwd: packed.dir });
    expect(`${stdout}\n${stderr}`).toMatch(new RegExp(`\\+ @q/${name}@\\d+\\.\\d+\\.\\d+`));
  }, 120_000);

  it('ships the license, source maps with their sources, and no placeholder address', async () => {
    const listing = await tarball(tgz(), ['package/package.json', 'package/LICENSE']);
    expect(listing.text['package/LICENSE']).toBe(fs.readFileSync(path.join(repo, 'LICENSE'), 'utf8'));
    const manifest = listing.text['package/package.json']!;
    expect(manifest).not.toMatch(/example\.invalid|TODO|your-org/);
    expect(JSON.parse(manifest).license).toBe('MIT');
    // Declaration maps would point into src/, which is not shipped.
    expect(listing.files.filter((f) => f.endsWith('.d.ts.map'))).toEqual([]);
    const maps = listing.files.filter((f) => f.endsWith('.js.map'));
    expect(maps.length).toBeGreaterThan(0);
    const sample = await tarball(tgz(), maps.slice(0, 5));
    for (const m of maps.slice(0, 5)) {
      const map = JSON.parse(sample.text[m]!) as { sources: string[]; sourcesContent?: (string | null)[] };
      expect(map.sourcesContent?.length, m).toBe(map.sources.length);
      expect(
        map.sourcesContent?.every((c) => typeof c === 'string' && c.length > 0),
        m,
      ).toBe(true);
    }
  }, 120_000);
});

it('@q/schema needs drizzle-orm only for its /tables entry: an optional peer, not a dependency', () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(repo, 'packages', 'schema', 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    peerDependencies: Record<string, string>;
    peerDependenciesMeta: Record<string, { optional?: boolean }>;
  };
  expect(manifest.dependencies['drizzle-orm']).toBeUndefined();
  expect(manifest.peerDependencies['drizzle-orm']).toBeDefined();
  expect(manifest.peerDependenciesMeta['drizzle-orm']?.optional).toBe(true);
});

it('every package folder carries the repository LICENSE', () => {
  const license = fs.readFileSync(path.join(repo, 'LICENSE'), 'utf8');
  for (const parent of ['packages', 'apps']) {
    for (const dir of fs.readdirSync(path.join(repo, parent))) {
      if (!fs.existsSync(path.join(repo, parent, dir, 'package.json'))) continue;
      expect(fs.readFileSync(path.join(repo, parent, dir, 'LICENSE'), 'utf8'), `${parent}/${dir}/LICENSE`).toBe(license);
    }
  }
});
