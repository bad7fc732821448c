import { describe, expect, it } from 'vitest';
import { CHECKED_SECTIONS, parseGlossary, parseMap, problemsOf, resolvePath } from '../src/map.js';
import { readText } from '../src/repo.js';

const rows = parseMap(readText('docs/architecture.md'));

describe('docs/architecture.md, the map', () => {
  it('has every checked table, each with rows', () => {
    for (const section of Object.keys(CHECKED_SECTIONS)) {
      expect(rows.filter((r) => r.section === section).length, section).toBeGreaterThan(5);
    }
  });

  it('names, in every row, files that exist and that mention each named symbol', () => {
    const stale = rows
      .map((row) => ({ row, problems: problemsOf(row) }))
      .filter((r) => r.problems.length > 0)
      .map(({ row, problems }) => `docs/architecture.md:${row.line} (${row.section}: ${row.label}): ${problems.join('; ')}`);
    expect(stale).toEqual([]);
  });

  it('catches a stale row (the check itself can fail)', () => {
    const [first] = parseMap(
      [
        '## Where is X decided',
        '',
        '| question | file | function |',
        '|---|---|---|',
        '| A job retry delay | `packages/job-worker/src/backoff.ts` | `noSuchFunction` |',
        '| Gone | `packages/job-worker/src/no-such-file.ts` | `retryBackoffMs` |',
      ].join('\n'),
    );
    expect(problemsOf(first!)).toEqual(['noSuchFunction is in none of packages/job-worker/src/backoff.ts']);
    const second = parseMap(
      ['## Where is X decided', '| question | file | function |', '|---|---|---|', '| Gone | `packages/x/src/gone.ts` | `f` |'].join('\n'),
    )[0]!;
    expect(problemsOf(second)).toEqual(['no file packages/x/src/gone.ts', 'f is in none of packages/x/src/gone.ts']);
  });

  it('resolves sql/ by section and short paths beside a full one', () => {
    const row = rows.find((r) => r.section === 'Job path' && r.files.includes('sql/claim-jobs.ts'))!;
    expect(resolvePath('sql/claim-jobs.ts', row)).toBe('packages/store/src/jobs/sql/claim-jobs.ts');
  });
});

describe('docs/glossary.md', () => {
  const glossary = parseGlossary(readText('docs/glossary.md'));

  it('defines the words a reader meets, each in its own row', () => {
    const terms = glossary.map((r) => r.label.toLowerCase());
    for (const word of ['epoch (leader)', 'epoch (partition)', 'saturated', 'holder', 'lapse', 'resume', 'stamp', 'head scan']) {
      expect(
        terms.some((t) => t.includes(word)),
        word,
      ).toBe(true);
    }
  });

  it('names files that exist and that mention each named symbol', () => {
    const stale = glossary
      .map((row) => ({ row, problems: problemsOf(row) }))
      .filter((r) => r.problems.length > 0)
      .map(({ row, problems }) => `docs/glossary.md:${row.line} (${row.label}): ${problems.join('; ')}`);
    expect(stale).toEqual([]);
  });

  it('is linked from the map', () => {
    expect(readText('docs/architecture.md')).toContain('(glossary.md)');
  });
});
