import { describe, expect, it } from 'vitest';
import { brokenLinks, unclosedFences } from '../src/markdown.js';
import { markdownFiles, readText } from '../src/repo.js';

const files = markdownFiles();

describe('every Markdown file of the repository', () => {
  it('is found (README, docs, packages)', () => {
    expect(files).toContain('README.md');
    expect(files).toContain('docs/architecture.md');
    expect(files.length).toBeGreaterThan(20);
  });

  it('closes every code fence it opens', () => {
    const open = files.flatMap((f) => unclosedFences(readText(f)).map((line) => `${f}:${line}`));
    expect(open).toEqual([]);
  });

  it('links only to files that exist in the repository', () => {
    const broken = files.flatMap((f) => brokenLinks(f, readText(f)).map((target) => `${f} → ${target}`));
    expect(broken).toEqual([]);
  });

  it('finds an unclosed fence and a broken link (the checks can fail)', () => {
    expect(unclosedFences('text\n```ts\nconst a = 1;\n```\n\n```sh\nnpm i\n')).toEqual([6]);
    expect(unclosedFences('````md\n```ts\n```\n````\n')).toEqual([]);
    expect(brokenLinks('docs/x.md', '[a](architecture.md) [b](../nowhere.md#top) [c](https://example.com) `[d](gone.md)`')).toEqual([
      '../nowhere.md#top',
    ]);
  });
});
