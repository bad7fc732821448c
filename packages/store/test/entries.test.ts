// Lighter installs: `@q/store/jobs` loads no request-queue module and no drizzle-orm (checked on the
// module list of a real child process), while the root entry does load the request queue.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnTs } from '@q/testing';
import { describe, expect, it } from 'vitest';

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const fixture = path.join(pkgDir, 'test', 'fixtures', 'loaded-modules.ts');

async function loadedBy(specifier: string): Promise<string[]> {
  const p = spawnTs(fixture, { args: [specifier], cwd: pkgDir });
  const { code } = await p.exited;
  expect(code, p.stderr()).toBe(0);
  return JSON.parse(p.stdout().trim()) as string[];
}

const requestModules = (urls: string[]) => urls.filter((u) => /\/store\/(src|dist)\/requests(-entry)?[./]/.test(u));
const jobModules = (urls: string[]) => urls.filter((u) => /\/store\/(src|dist)\/jobs\//.test(u));
const drizzle = (urls: string[]) => urls.filter((u) => u.includes('/drizzle-orm/'));

describe('package entries', () => {
  it('@q/store/jobs loads the job store, no request-queue module and no drizzle-orm', async () => {
    const urls = await loadedBy('@q/store/jobs');
    expect(jobModules(urls).length).toBeGreaterThan(0);
    expect(requestModules(urls)).toEqual([]);
    expect(drizzle(urls)).toEqual([]);
  });

  it('@q/store/requests loads the request queue and no job-store module', async () => {
    const urls = await loadedBy('@q/store/requests');
    expect(requestModules(urls).length).toBeGreaterThan(0);
    expect(jobModules(urls)).toEqual([]);
    expect(drizzle(urls)).toEqual([]);
  });

  it('the root entry loads both halves (the check above can see request modules)', async () => {
    const urls = await loadedBy('@q/store');
    expect(requestModules(urls).length).toBeGreaterThan(0);
    expect(jobModules(urls).length).toBeGreaterThan(0);
    expect(drizzle(urls)).toEqual([]);
  });

  it('@q/schema loads no drizzle-orm; @q/schema/tables does', async () => {
    expect(drizzle(await loadedBy('@q/schema'))).toEqual([]);
    expect(drizzle(await loadedBy('@q/schema/tables')).length).toBeGreaterThan(0);
  });
});
