// A job-queue user installs @q/job-worker: importing it loads the job store through `@q/store/jobs`
// only, never a request-queue module nor drizzle-orm (the module list of a real child process,
// recorded by @q/store's loaded-modules fixture).
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawnTs } from '@q/testing';
import { expect, it } from 'vitest';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = path.resolve(here, '../../store/test/fixtures/loaded-modules.ts');
const entry = pathToFileURL(path.resolve(here, '../src/index.ts')).href;

it('@q/job-worker loads the job store and no request-queue module or drizzle-orm', async () => {
  const p = spawnTs(fixture, { args: [entry], cwd: path.resolve(here, '..') });
  const { code } = await p.exited;
  expect(code, p.stderr()).toBe(0);
  const urls = JSON.parse(p.stdout().trim()) as string[];
  expect(urls.filter((u) => /\/store\/(src|dist)\/jobs\//.test(u)).length).toBeGreaterThan(0);
  expect(urls.filter((u) => /\/store\/(src|dist)\/requests(-entry)?[./]/.test(u))).toEqual([]);
  expect(urls.filter((u) => u.includes('/drizzle-orm/'))).toEqual([]);
});
